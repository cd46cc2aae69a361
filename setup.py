"""Distribution `homepage-monitor`: watch homepages, alert on every newly published link."""
from setuptools import find_packages, setup

setup(
    name="homepage-monitor",
    version="0.1.0",
    description="Watch homepages and alert on every newly published link",
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    license="Apache-2.0",
    python_requires=">=3.11",
    packages=find_packages(include=["monitor", "monitor.*", "workers", "workers.*", "controller", "controller.*"]),
    package_data={"monitor.web": ["templates/*.html", "static/*"]},  # the dashboard's pages, CSS and script
    install_requires=[
        "pika>=1.3",
        "requests>=2.31",
        "urllib3>=2.0",  # requests' HTTP engine: fetching uses it directly (monitor/fetch.py says why)
        "certifi",  # the CA bundle requests would use
        "html5lib>=1.1",
        "beautifulsoup4>=4.12",
        "plyvel>=1.5",
        "supervisor>=4.2",
        "schedule>=1.2",
        "selectolax>=1.0.2",  # lexbor: the fast HTML5 parse engine
        "PySocks>=1.7",  # socks5:// proxies
        "apprise>=1.6",  # the `apprise` sink kind: chat, push and mail services by URL
        "feedgen>=1.0",  # the Atom feeds of the alerts
        "tldextract>=5.3",  # registrable domains for the same-site filter (its bundled suffix list)
        "PyYAML>=6.0",  # `watch import` of urlwatch's urls.yaml
        "flask>=3.0",  # the web front (monitor/web)
        "waitress>=3.0",  # its production WSGI server
        "prometheus_client>=0.20",  # /metrics
        "regex>=2023.0",  # filter expressions with a time limit (monitor/filters.py)
    ],
    extras_require={"test": ["pytest>=7", "pytest-timeout>=2", "feedparser>=6", "aiosmtpd>=1.4", "selenium>=4.15"]},
    entry_points={"console_scripts": ["monitor = monitor.cli:main"]},
)
