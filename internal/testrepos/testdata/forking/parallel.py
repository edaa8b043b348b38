"""Helpers run in child processes (an ndtrace test fixture)."""


def square(x):
    return x * x


def send_square(conn, x):
    conn.send(square(x))
    conn.close()
