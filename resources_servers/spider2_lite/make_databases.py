"""Build spider2_lite's bundled SQLite database, in Spider 2.0-Lite's flat layout (`<dir>/<db_id>.sqlite`).

The server runs this at startup into a private temporary folder when `spider2_lite_dir` is not set (it is
deterministic and fast, so no binary file is committed). By hand:
`python -m resources_servers.spider2_lite.make_databases /tmp/spider2_dbs`.
"""

from __future__ import annotations

import sqlite3
import sys
from contextlib import closing
from pathlib import Path

DB_ID = "retail_shop"
SCHEMA = """
CREATE TABLE stores (store_id INTEGER PRIMARY KEY, city TEXT NOT NULL, region TEXT NOT NULL);
CREATE TABLE products (product_id INTEGER PRIMARY KEY, name TEXT NOT NULL, category TEXT NOT NULL,
  unit_price REAL NOT NULL);
CREATE TABLE sales (sale_id INTEGER PRIMARY KEY, store_id INTEGER NOT NULL REFERENCES stores(store_id),
  product_id INTEGER NOT NULL REFERENCES products(product_id), sale_date TEXT NOT NULL,
  quantity INTEGER NOT NULL);
"""
ROWS = {
    "stores": [(1, "Porto", "north"), (2, "Braga", "north"), (3, "Faro", "south"), (4, "Lisbon", "centre")],
    "products": [
        (1, "espresso beans", "coffee", 11.5),
        (2, "green tea", "tea", 6.25),
        (3, "oat milk", "dairy-free", 2.4),
        (4, "filter coffee", "coffee", 9.0),
        (5, "mint tea", "tea", 5.75),
    ],
    "sales": [
        (1, 1, 1, "2023-11-03", 4),
        (2, 1, 3, "2023-11-03", 10),
        (3, 2, 2, "2023-11-17", 3),
        (4, 3, 4, "2023-12-01", 6),
        (5, 4, 1, "2023-12-08", 2),
        (6, 4, 5, "2023-12-08", 7),
        (7, 2, 1, "2024-01-12", 5),
        (8, 3, 3, "2024-01-20", 12),
        (9, 1, 4, "2024-02-02", 1),
        (10, 4, 2, "2024-02-14", 8),
    ],
}


def schema_text() -> str:
    """The CREATE statements, as the example prompts show them."""
    return SCHEMA.strip()


def build_databases(target: Path) -> dict[str, Path]:
    """Write the bundled database into `target` (which must exist); answer db_id → file."""
    path = target / f"{DB_ID}.sqlite"
    path.unlink(missing_ok=True)
    with closing(sqlite3.connect(path)) as connection:
        connection.executescript(SCHEMA)
        for table, rows in ROWS.items():
            marks = ", ".join("?" * len(rows[0]))
            connection.executemany(f"INSERT INTO {table} VALUES ({marks})", rows)
        connection.commit()
    return {DB_ID: path}


if __name__ == "__main__":
    for db_id, path in build_databases(Path(sys.argv[1])).items():
        print(db_id, path)
