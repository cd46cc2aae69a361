// The alerts page, live: every POLL_MS ask /alerts/rows for the alerts recorded after the
// last one shown (same filters as the page) and put their rows on top. Without this script
// the page is a plain list; with it, no reload is needed.
"use strict";
(function () {
  const POLL_MS = 2000;
  const table = document.getElementById("alerts");
  if (!table) return;
  const body = table.tBodies[0];
  const state = document.getElementById("live-state");
  let last = Number(table.dataset.last) || 0;

  async function poll() {
    try {
      const url = new URL(table.dataset.rowsUrl, location.href);
      url.searchParams.set("after", String(last));
      const response = await fetch(url, { headers: { Accept: "application/json" }, cache: "no-store" });
      if (!response.ok) throw new Error("HTTP " + response.status);
      const answer = await response.json();
      if (answer.count) {
        const holder = document.createElement("tbody");
        holder.innerHTML = answer.html;
        // Newest first, like the page; a row already shown (recorded while the page was
        // being rendered) is not shown twice.
        for (const row of Array.from(holder.rows).reverse()) {
          if (!document.getElementById(row.id)) {
            row.classList.add("fresh");
            body.insertBefore(row, body.firstChild);
          }
        }
      }
      last = Math.max(last, answer.last);
      if (state) state.textContent = "The newest first, live: new links appear here as they are found.";
    } catch (error) {
      if (state) state.textContent = "Live updates paused (" + error.message + "): retrying.";
    }
    setTimeout(poll, POLL_MS);
  }
  setTimeout(poll, POLL_MS);
})();
