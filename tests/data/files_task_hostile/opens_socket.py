"""Hostile candidate: connects to a port on this machine and sends a message."""
import socket

PORT = int("__TARGET__")


def run():
    with socket.create_connection(("127.0.0.1", PORT), timeout=10) as connection:
        connection.sendall(b"sent by a candidate")
    return 1.0
