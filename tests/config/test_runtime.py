"""The embedded PostgreSQL's settings block: sized from the machine's memory, rewritten in place."""

from __future__ import annotations

from config import runtime

GB = 2**30


def test_shared_buffers_are_a_quarter_of_memory_within_bounds() -> None:
    assert "shared_buffers = '6144MB'" in runtime.postgres_conf(24 * GB)
    assert "effective_cache_size = '12288MB'" in runtime.postgres_conf(24 * GB)
    assert "shared_buffers = '128MB'" in runtime.postgres_conf(GB // 4)
    assert "shared_buffers = '8192MB'" in runtime.postgres_conf(128 * GB)


def test_the_block_replaces_an_earlier_one_and_leaves_the_rest_alone() -> None:
    stock = "listen_addresses = ''\nshared_buffers = 128MB\n"
    old = stock + "\n" + runtime.CONF_MARKER + "\nshared_buffers = '1GB'\njit = off\n"
    new_block = runtime.postgres_conf(24 * GB)
    once = runtime.conf_with_settings(old, new_block)
    assert once.startswith(stock)
    assert once.count(runtime.CONF_MARKER) == 1
    assert "'1GB'" not in once and "shared_buffers = '6144MB'" in once
    # rewriting with the same block changes nothing (the file is only written when it differs)
    assert runtime.conf_with_settings(once, new_block) == once
    # a file without the block gets it appended
    assert runtime.conf_with_settings(stock, new_block) == stock + new_block
