"""Build bird_sql's two bundled SQLite databases, in BIRD's layout (`<dir>/<db_id>/<db_id>.sqlite`).

The server runs this at startup into a private temporary folder when `bird_sql_dir` is not set, so no
binary file is committed; it is deterministic and takes milliseconds. Run it by hand to look at them:
`python -m resources_servers.bird_sql.make_databases /tmp/bird_dbs`.
"""

from __future__ import annotations

import sqlite3
import sys
from contextlib import closing
from pathlib import Path

SCHEMAS = {
    "school": """
CREATE TABLE teachers (teacher_id INTEGER PRIMARY KEY, name TEXT NOT NULL, subject TEXT NOT NULL,
  hired_year INTEGER NOT NULL);
CREATE TABLE students (student_id INTEGER PRIMARY KEY, name TEXT NOT NULL, grade INTEGER NOT NULL,
  city TEXT NOT NULL);
CREATE TABLE enrollments (student_id INTEGER NOT NULL REFERENCES students(student_id),
  teacher_id INTEGER NOT NULL REFERENCES teachers(teacher_id), score REAL,
  PRIMARY KEY (student_id, teacher_id));
""",
    "clinic": """
CREATE TABLE doctors (doctor_id INTEGER PRIMARY KEY, name TEXT NOT NULL, specialty TEXT NOT NULL);
CREATE TABLE patients (patient_id INTEGER PRIMARY KEY, name TEXT NOT NULL, birth_year INTEGER NOT NULL,
  sex TEXT NOT NULL);
CREATE TABLE visits (visit_id INTEGER PRIMARY KEY, patient_id INTEGER NOT NULL REFERENCES patients(patient_id),
  doctor_id INTEGER NOT NULL REFERENCES doctors(doctor_id), visit_date TEXT NOT NULL, fee REAL NOT NULL);
""",
}

ROWS = {
    "school": {
        "teachers": [
            (1, "Ada Brandt", "math", 2009),
            (2, "Omar Haddad", "physics", 2015),
            (3, "Lena Ortiz", "history", 2012),
            (4, "Jun Sato", "math", 2020),
        ],
        "students": [
            (1, "Mia Keller", 10, "Lyon"),
            (2, "Noah Petit", 11, "Lyon"),
            (3, "Ella Roux", 10, "Nantes"),
            (4, "Liam Moreau", 12, "Lille"),
            (5, "Zoe Girard", 11, "Nantes"),
            (6, "Hugo Lambert", 12, "Lyon"),
        ],
        "enrollments": [
            (1, 1, 17.5),
            (1, 2, 14.0),
            (2, 1, 12.0),
            (2, 3, 15.5),
            (3, 4, 18.0),
            (4, 2, 9.5),
            (4, 3, 11.0),
            (5, 1, 16.0),
            (6, 4, None),
        ],
    },
    "clinic": {
        "doctors": [
            (1, "Dr. Novak", "cardiology"),
            (2, "Dr. Iyer", "pediatrics"),
            (3, "Dr. Okafor", "cardiology"),
            (4, "Dr. Lind", "dermatology"),
        ],
        "patients": [
            (1, "Aino Virta", 1956, "F"),
            (2, "Bruno Costa", 2016, "M"),
            (3, "Chloe Dubois", 1988, "F"),
            (4, "Dev Mehta", 1971, "M"),
            (5, "Eva Horvat", 2019, "F"),
        ],
        "visits": [
            (1, 1, 1, "2024-01-09", 120.0),
            (2, 2, 2, "2024-01-15", 60.0),
            (3, 1, 3, "2024-02-02", 135.5),
            (4, 3, 4, "2024-02-20", 80.0),
            (5, 4, 1, "2024-03-05", 120.0),
            (6, 5, 2, "2024-03-18", 60.0),
            (7, 4, 3, "2024-04-11", 135.5),
            (8, 3, 4, "2024-05-07", 95.0),
        ],
    },
}


def schema_text(db_id: str) -> str:
    """The CREATE statements of `db_id`, as the example prompts show them."""
    return SCHEMAS[db_id].strip()


def build_databases(target: Path) -> dict[str, Path]:
    """Write every bundled database under `target` (which must exist); answer db_id → file."""
    built = {}
    for db_id, schema in SCHEMAS.items():
        path = target / db_id / f"{db_id}.sqlite"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.unlink(missing_ok=True)
        with closing(sqlite3.connect(path)) as connection:
            connection.executescript(schema)
            for table, rows in ROWS[db_id].items():
                marks = ", ".join("?" * len(rows[0]))
                connection.executemany(f"INSERT INTO {table} VALUES ({marks})", rows)
            connection.commit()
        built[db_id] = path
    return built


if __name__ == "__main__":
    for db_id, path in build_databases(Path(sys.argv[1])).items():
        print(db_id, path)
