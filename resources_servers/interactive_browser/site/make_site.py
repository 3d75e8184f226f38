"""Writes the example tasks' local pages (a small library site) next to this script.

Run `python resources_servers/interactive_browser/site/make_site.py` after changing a page; the generated
.html files are committed, so the server and the tests never build them. The pages use no network
resources: everything is inline.
"""

from __future__ import annotations

from pathlib import Path

HERE = Path(__file__).resolve().parent

STYLE = "body{font-family:sans-serif;max-width:40em;margin:2em auto}nav a{margin:0 .5em}"
NAV = '<nav><a href="index.html">Home</a> | <a href="catalog.html">Catalog</a> | <a href="join.html">Join</a> | <a href="hours.html">Hours</a></nav>'


def page(title: str, body: str, script: str = "") -> str:
    tail = f"<script>{script}</script>" if script else ""
    return (
        f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{title}</title>'
        f"<style>{STYLE}</style></head><body>{NAV}<h1>{title}</h1>{body}{tail}</body></html>\n"
    )


PAGES = {
    "index.html": page(
        "Harbor Street Library",
        "<p>Welcome to the Harbor Street Library. Browse the catalog, become a member, or check our hours.</p>",
    ),
    "hours.html": page(
        "Opening Hours",
        "<p>Monday to Friday: 9:00 to 18:00. Saturday: 10:00 to 14:00. Closed on Sunday.</p>"
        "<p>Reading room door code: <strong>TEAL-7</strong></p>",
    ),
    "join.html": page(
        "Become a Member",
        '<form id="join"><label for="member">Full name</label> <input id="member" type="text">'
        ' <button type="submit">Sign me up</button></form><p id="status"></p>',
        "document.getElementById('join').addEventListener('submit', (event) => {"
        " event.preventDefault();"
        " const name = document.getElementById('member').value.trim();"
        " document.getElementById('status').textContent ="
        " name ? 'Welcome aboard, ' + name + '!' : 'Please enter your name.'; });",
    ),
    "catalog.html": page(
        "Catalog",
        "<ul>"
        '<li>Tidal Atlas <button data-book="Tidal Atlas">Reserve Tidal Atlas</button></li>'
        '<li>Lighthouse Keeping <button data-book="Lighthouse Keeping">Reserve Lighthouse Keeping</button></li>'
        '<li>Knots and Rigging <button data-book="Knots and Rigging">Reserve Knots and Rigging</button></li>'
        '</ul><p id="reserved">No reservation yet.</p>',
        "for (const button of document.querySelectorAll('button[data-book]')) {"
        " button.addEventListener('click', () => {"
        " document.getElementById('reserved').textContent = 'Reserved: ' + button.dataset.book; }); }",
    ),
}


def main() -> None:
    for name, html in PAGES.items():
        (HERE / name).write_text(html, encoding="utf-8")


if __name__ == "__main__":
    main()
