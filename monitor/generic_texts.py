"""Link texts that say nothing about where a link goes ("read more", "weiter", "lire la
suite"): the noise rule holds back new links whose whole text is one of these.

Texts are compared folded (:func:`fold`): lower case, accents and punctuation dropped,
spaces collapsed, so "Read more »", "READ MORE..." and "leer mas" match "read more" and
"leer más". Add a language as one more entry of ``BY_LANGUAGE``.
"""
from __future__ import annotations

import unicodedata

BY_LANGUAGE: dict[str, tuple[str, ...]] = {
    "en": ("more", "read more", "read on", "continue", "continue reading", "keep reading", "more info", "see more",
           "view more", "show more", "learn more", "find out more", "full story", "read the full story",
           "read full article", "read article", "details", "more details", "click here", "here", "next", "previous",
           "prev", "back", "view all", "see all", "show all", "all", "home", "top", "back to top"),
    "de": ("mehr", "weiter", "weiterlesen", "mehr lesen", "mehr erfahren", "mehr dazu", "mehr zum thema",
           "mehr infos", "zum artikel", "artikel lesen", "hier", "hier klicken", "zurück", "vor", "nächste",
           "vorherige", "alle", "alle anzeigen", "alles anzeigen", "details", "startseite", "nach oben"),
    "fr": ("plus", "suite", "la suite", "lire la suite", "lire plus", "en savoir plus", "voir plus", "voir tout",
           "tout voir", "ici", "cliquez ici", "suivant", "précédent", "retour", "accueil", "haut de page"),
    "es": ("más", "leer más", "ver más", "seguir leyendo", "saber más", "continuar", "continuar leyendo", "aquí",
           "haz clic aquí", "siguiente", "anterior", "volver", "ver todo", "ver todos", "inicio"),
    "it": ("continua", "continua a leggere", "leggi", "leggi tutto", "leggi di più", "altro", "di più",
           "scopri di più", "qui", "clicca qui", "avanti", "indietro", "successivo", "precedente", "vedi tutto",
           "vedi tutti", "home page"),
    "nl": ("meer", "lees meer", "lees verder", "verder", "verder lezen", "meer lezen", "bekijk meer", "hier",
           "klik hier", "volgende", "vorige", "terug", "alles", "bekijk alles", "alle", "naar boven"),
    "pt": ("mais", "leia mais", "ler mais", "ver mais", "saiba mais", "continuar lendo", "continue lendo", "aqui",
           "clique aqui", "seguinte", "próximo", "anterior", "voltar", "ver tudo", "ver todos", "início"),
}


def fold(text: str) -> str:
    """``text`` lower-cased, without accents, punctuation or symbols (arrows, », ...), its
    words separated by single spaces: '' for a text of no words at all."""
    decomposed = unicodedata.normalize("NFKD", text.casefold())
    kept = (" " if unicodedata.category(char)[0] in "PSZC" else char for char in decomposed
            if not unicodedata.combining(char))
    return " ".join("".join(kept).split())


GENERIC = frozenset(fold(text) for texts in BY_LANGUAGE.values() for text in texts)
