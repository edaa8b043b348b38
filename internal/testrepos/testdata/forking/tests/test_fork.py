import multiprocessing
import os

from parallel import send_square, square


def test_square():
    assert square(3) == 9


def test_os_fork():
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status)
    assert os.WEXITSTATUS(status) == 0


def test_multiprocessing_fork():
    ctx = multiprocessing.get_context("fork")
    parent, child = ctx.Pipe(duplex=False)
    p = ctx.Process(target=send_square, args=(child, 7))
    p.start()
    child.close()
    p.join()
    assert p.exitcode == 0
    assert parent.poll()
    assert parent.recv() == 49
