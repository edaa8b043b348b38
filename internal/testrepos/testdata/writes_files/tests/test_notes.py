import os

import notes


def with_store(check):
    db = notes.open_store()
    try:
        check(db)
    finally:
        db.close()
        os.remove(notes.DB_PATH)


def test_put_get():
    def check(db):
        notes.put(db, "a", "first note")
        assert notes.get(db, "a") == "first note"
        assert os.path.exists(notes.DB_PATH)
    with_store(check)


def test_missing():
    with_store(lambda db: notes.get(db, "nothing") is None)


def test_log_next_to_code():
    notes.log("hello")
    try:
        with open(notes.LOG_PATH) as f:
            assert f.read().endswith("hello\n")
    finally:
        os.remove(notes.LOG_PATH)


def test_word_count():
    assert notes.word_count("two words 3") == 2
