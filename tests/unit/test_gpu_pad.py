"""The full-device GPU pad: its grid fills every SM's thread slots, and it is loaded and launched through
the driver API as documented (a fake driver records the calls; the kernel itself runs only on a GPU)."""

import ctypes

from kevolve.sandbox.runner.pad import BLOCK, PTX, Pad, grid_for


class FakeDriver:
    def __init__(self, load_rc: int = 0) -> None:
        self.load_rc, self.launches = load_rc, []

    def cuModuleLoadData(self, module, image) -> int:  # noqa: ANN001, N802
        assert image.value == PTX
        return self.load_rc

    def cuModuleGetFunction(self, function, module, name) -> int:  # noqa: ANN001, N802
        assert name == b"kevolve_pad"
        return 0

    def cuLaunchKernel(self, f, gx, gy, gz, bx, by, bz, shmem, stream, params, extra) -> int:  # noqa: ANN001, N802
        ns = ctypes.cast(params[0], ctypes.POINTER(ctypes.c_uint64)).contents.value
        self.launches.append(((gx, gy, gz), (bx, by, bz), shmem, stream.value, ns))
        return 0


def test_the_grid_fills_every_sms_thread_slots() -> None:
    assert grid_for(132, 2048) == 264 and BLOCK == 1024  # H100 SXM: 132 SMs, 2,048 threads each
    assert grid_for(4, 1536) == 4 and grid_for(0, 0) == 1


def test_the_pad_launches_on_the_given_stream_for_the_given_nanoseconds() -> None:
    drv = FakeDriver()
    pad = Pad.load(132, 2048, driver=drv)
    assert pad is not None
    pad.launch(250_000, 0xABC)
    assert drv.launches == [((264, 1, 1), (1024, 1, 1), 0, 0xABC, 250_000)]


def test_a_driver_that_cannot_load_the_pad_leaves_the_sleep_pad() -> None:
    assert Pad.load(132, 2048, driver=FakeDriver(load_rc=218)) is None
    assert Pad.load(132, 2048, driver=object()) is None  # no driver API at all
