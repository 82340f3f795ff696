"""The non-Linux sendfile fallback of netio_sys.h (pread + send), built on
this machine with KFAST_NO_SENDFILE so it is exercised where wheels for
macOS/BSD cannot be tested: partial sends on a full non-blocking socket must
resume without losing or repeating a byte."""

import os
import shutil
import subprocess
import sysconfig

import pytest

import kfast._ext

HARNESS = r"""
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include "netio_sys.h"

#if KFAST_HAVE_SENDFILE
#error "KFAST_NO_SENDFILE did not select the fallback"
#endif

int main(int argc, char **argv)
{
    int sv[2];
    int file = open(argv[1], O_RDONLY);
    long size = atol(argv[2]);
    long offset = 0, received = 0, blocked = 0;
    char *expect = malloc(size), *got = malloc(size);
    if (file < 0 || pread(file, expect, size, 0) != size) return 2;
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) return 3;
    fcntl(sv[0], F_SETFL, O_NONBLOCK);
    fcntl(sv[1], F_SETFL, O_NONBLOCK);
    while (offset < size || received < size) {
        if (offset < size) {
            int copied = 0;
            ssize_t n = kfast_sendfile(sv[0], file, offset, (size_t)(size - offset), &copied);
            if (!copied) return 8;
            if (n > 0) offset += n;
            else if (n < 0 && errno == EAGAIN) blocked++;
            else return 4;
        }
        ssize_t r = recv(sv[1], got + received, 7000, 0);  /* a slow reader */
        if (r > 0) received += r;
        else if (!(r < 0 && errno == EAGAIN)) return 5;
    }
    int copied = 0;
    if (kfast_sendfile(sv[0], file, size, 10, &copied) != 0) return 6;  /* end of file */
    if (memcmp(expect, got, size) != 0) return 7;
    printf("%ld\n", blocked);
    return 0;
}
"""


CC = (sysconfig.get_config_var("CC") or "cc").split()


@pytest.mark.skipif(shutil.which(CC[0]) is None, reason="needs a C compiler")
def test_pread_send_fallback_resumes_partial_sends(tmp_path):
    source = tmp_path / "harness.c"
    source.write_text(HARNESS)
    binary = tmp_path / "harness"
    include = os.path.dirname(kfast._ext.__file__)
    subprocess.run(
        CC + ["-O1", "-DKFAST_NO_SENDFILE", "-I", include, str(source), "-o", str(binary)],
        check=True,
        capture_output=True,
    )
    data = tmp_path / "segment.log"
    data.write_bytes(os.urandom(3 * 1024 * 1024 + 5))
    result = subprocess.run(
        [str(binary), str(data), str(data.stat().st_size)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.returncode
    assert int(result.stdout) > 0  # the socket really filled up and resumed
