"""A tiny note store that keeps its SQLite database and its log next to the code, as many small
projects do."""
import os
import sqlite3

HERE = os.path.dirname(os.path.abspath(__file__))
DB_PATH = os.path.join(HERE, "notes.db")
LOG_PATH = os.path.join(HERE, "notes.log")


def open_store(path=DB_PATH):
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE IF NOT EXISTS notes (title TEXT PRIMARY KEY, body TEXT)")
    return db


def put(db, title, body):
    db.execute("INSERT OR REPLACE INTO notes VALUES (?, ?)", (title, body))
    db.commit()
    log("put " + title)


def get(db, title):
    row = db.execute("SELECT body FROM notes WHERE title = ?", (title,)).fetchone()
    return row[0] if row else None


def log(line):
    with open(LOG_PATH, "a") as f:
        f.write(line + "\n")


def word_count(text):
    count = 0
    for word in text.split():
        if word.isalpha():
            count += 1
    return count
