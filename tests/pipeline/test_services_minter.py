"""Local NOID-style minter (across processes) and the EZID client against a fake EZID."""

import multiprocessing
import os
import re
import threading
from pathlib import Path

import pytest

from merritt_queue.services.errors import MinterError
from merritt_queue.services.ezid import EzidMinter, anvl
from merritt_queue.services.minter import (
    Citation,
    LocalMinter,
    blade,
    ncda,
    ncda_valid,
)
from merritt_queue.services.minttokens import MintTokens

pytest_plugins = ["tests.httpserver"]

pytestmark = pytest.mark.usefixtures("loopback_only")

SHOULDER = "ark:/99999/fk4"
ID = re.compile(r"ark:/99999/fk4[bcdfghjkmnpqrstvwxz0-9]{6,}[0-9bcdfghjkmnpqrstvwxz]")


# -- NOID pieces --------------------------------------------------------------------------


def test_ncda_matches_the_noid_documentation_example():
    assert ncda("13030/xf93gt2") == "q"
    assert ncda_valid("ark:/13030/xf93gt2q")
    assert not ncda_valid("ark:/13030/xf93gt2r")
    assert not ncda_valid("ark:/13030/xf39gt2q")  # transposed digits are caught


def test_blade_is_base_29_padded_to_six():
    assert blade(0) == "bbbbbb"
    assert blade(1) == "bbbbbc"
    assert blade(28) == "bbbbb9"
    assert blade(29) == "bbbbcb"
    assert len(blade(29**6)) == 7


# -- LocalMinter --------------------------------------------------------------------------


def test_local_ids_have_the_noid_shape(tmp_path):
    minter = LocalMinter(tmp_path)
    first = minter.mint(SHOULDER, citation=Citation(who="Jane", what="Thing"))
    assert first == "ark:/99999/fk4bbbbbb" + ncda("99999/fk4bbbbbb")
    for ark in [first] + [minter.mint(SHOULDER) for _ in range(50)]:
        assert ID.fullmatch(ark), ark
        assert ncda_valid(ark)


def test_local_counter_persists_across_instances(tmp_path):
    first = [LocalMinter(tmp_path).mint(SHOULDER) for _ in range(3)]
    again = LocalMinter(tmp_path).mint(SHOULDER)
    assert again not in first
    assert again == "ark:/99999/fk4bbbbbf" + ncda("99999/fk4bbbbbf")
    assert (tmp_path / "99999-fk4.counter").read_text() == "4\n"


def test_shoulders_have_their_own_counters(tmp_path):
    minter = LocalMinter(tmp_path)
    a = minter.mint("ark:/99999/fk4")
    b = minter.mint("ark:/13030/m5")
    assert a.startswith("ark:/99999/fk4bbbbbb") and b.startswith("ark:/13030/m5bbbbbb")


@pytest.mark.parametrize("shoulder", ["99999/fk4", "ark:/99/fk4", "ark:/99999/", "ark:/99999/FK4"])
def test_malformed_shoulder_is_refused(tmp_path, shoulder):
    with pytest.raises(MinterError, match="is not of the form ark:/NAAN/prefix"):
        LocalMinter(tmp_path).mint(shoulder)


def test_corrupt_counter_is_not_silently_reset(tmp_path):
    (tmp_path / "99999-fk4.counter").write_text("garbage")
    with pytest.raises(MinterError, match="corrupt"):
        LocalMinter(tmp_path).mint(SHOULDER)


def test_local_ids_unique_across_threads(tmp_path):
    minted: list[str] = []
    lock = threading.Lock()

    def work():
        ids = [LocalMinter(tmp_path).mint(SHOULDER) for _ in range(50)]
        with lock:
            minted.extend(ids)

    threads = [threading.Thread(target=work) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(minted) == len(set(minted)) == 300


def _mint_many(state_dir: str, count: int, start, results) -> None:
    minter = LocalMinter(Path(state_dir))
    start.wait()  # all processes mint at the same time
    results.put([minter.mint(SHOULDER) for _ in range(count)])


def test_local_ids_unique_across_processes(tmp_path):
    # spawn, not fork: a forked child could inherit a lock held by another test's thread.
    ctx = multiprocessing.get_context("spawn")
    start, results = ctx.Barrier(4), ctx.Queue()
    procs = [
        ctx.Process(target=_mint_many, args=(str(tmp_path), 200, start, results)) for _ in range(4)
    ]
    for p in procs:
        p.start()
    minted = [ark for _ in procs for ark in results.get(timeout=120)]
    for p in procs:
        p.join(30)
        assert p.exitcode == 0
    assert len(minted) == 800
    assert len(set(minted)) == 800
    assert all(ncda_valid(ark) for ark in minted)
    assert (tmp_path / "99999-fk4.counter").read_text() == "800\n"


# -- EZID ---------------------------------------------------------------------------------


@pytest.fixture
def ezid_minter(ezid_server, session_factory):
    def make(**kwargs) -> EzidMinter:
        options = {
            "base_url": ezid_server.url,
            "username": ezid_server.username,
            "password": ezid_server.password,
            "session_factory": session_factory,
        }
        return EzidMinter(**(options | kwargs))

    return make


def test_anvl_escaping_follows_ezid_rules():
    text = anvl({"erc.what": "50% off: now\r\nlater", "odd:name": "x", "empty": ""})
    assert text == "erc.what: 50%25 off: now%0D%0Alater\nodd%3Aname: x"


def test_ezid_mint_success(ezid_server, ezid_minter):
    ark = ezid_minter().mint(
        SHOULDER,
        citation=Citation(who="Doe, Jane", what="Report: 100% done\nsecond line", when="2024"),
    )
    assert ark == "ark:/99999/fk4000001"
    request = ezid_server.server.requests[-1]
    assert request.method == "POST" and request.path == "/shoulder/ark:/99999/fk4"
    assert request.headers["content-type"] == "text/plain; charset=UTF-8"
    assert b"what: Report: 100%25 done%0A    second line%0A" in request.body
    assert ezid_server.minted == [
        (
            ark,
            {"erc": "who: Doe, Jane\nwhat: Report: 100% done\n    second line\nwhen: 2024\n"},
        )
    ]


def test_ezid_error_is_reported(ezid_minter):
    with pytest.raises(MinterError) as info:
        ezid_minter().mint("ark:/99999/zz9")
    assert str(info.value) == (
        "EZID could not mint on ark:/99999/zz9 (400 Bad Request): "
        "bad request - no such shoulder created: ark:/99999/zz9"
    )
    assert info.value.retryable is False


def test_ezid_bad_credentials(ezid_minter):
    with pytest.raises(MinterError) as info:
        ezid_minter(password="wrong").mint(SHOULDER)
    assert "EZID refused the credentials of user 'apitest' (401 Unauthorized)" in str(info.value)
    assert info.value.retryable is False


def test_ezid_server_error_is_retryable(ezid_server, ezid_minter):
    ezid_server.server.behave("/shoulder/ark:/99999/fk4", status=503)
    with pytest.raises(MinterError) as info:
        ezid_minter().mint(SHOULDER)
    assert "(503 Service Unavailable)" in str(info.value)
    assert info.value.retryable is True
    assert ezid_server.minted == []


def test_ezid_down_is_retryable(ezid_minter):
    with pytest.raises(MinterError) as info:
        ezid_minter(base_url="http://127.0.0.1:1").mint(SHOULDER)
    assert str(info.value) == "EZID at http://127.0.0.1:1 could not be reached: connection refused"
    assert info.value.retryable is True


def test_a_token_mints_once_so_a_re_run_step_gets_the_same_ark(tmp_path):
    minter = LocalMinter(tmp_path)
    first = minter.mint(SHOULDER, token="jid0000000001")
    assert LocalMinter(tmp_path).mint(SHOULDER, token="jid0000000001") == first
    other = minter.mint(SHOULDER, token="jid0000000002")
    untokened = minter.mint(SHOULDER)
    assert len({first, other, untokened}) == 3
    # The same job under another shoulder is another identifier.
    assert minter.mint("ark:/13030/m5", token="jid0000000001").startswith("ark:/13030/m5")
    with pytest.raises(MinterError, match="plain name"):
        minter.mint(SHOULDER, token="../x")


def test_a_forgotten_token_leaves_nothing_behind_and_mints_anew(tmp_path):
    minter = LocalMinter(tmp_path)
    first = minter.mint(SHOULDER, token="jid0000000001")
    minter.forget(SHOULDER, "jid0000000001")
    minter.forget(SHOULDER, "jid0000000001")  # twice: no error
    assert not any((tmp_path / "99999-fk4.tokens").iterdir())
    assert minter.mint(SHOULDER, token="jid0000000001") != first
    with pytest.raises(MinterError, match="plain name"):
        minter.forget(SHOULDER, "../x")


def _fsynced_paths(monkeypatch) -> list[str]:
    """Every path os.fsync is called on, in order (Linux: read back from /proc)."""
    paths: list[str] = []
    real = os.fsync

    def fsync(fd):
        # A file written to a temporary name and renamed is named by its final name.
        paths.append(re.sub(r"\.[0-9]+\.tmp$", "", os.readlink(f"/proc/self/fd/{fd}")))
        return real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    return paths


@pytest.mark.parametrize("left", ["", "ark:/99999/fk4b", "\0" * 20, "ark:/99999/fk4bbbbbbb\n"])
def test_a_token_file_a_crash_cut_short_mints_anew(tmp_path, left):
    # The token file is not fsynced (see the module's guarantees): after a machine crash it may
    # be empty, zero-filled or torn. Its ARK was never saved, so a new one is minted.
    minter = LocalMinter(tmp_path)
    earlier = minter.mint(SHOULDER)
    tokens = tmp_path / "99999-fk4.tokens"
    tokens.mkdir()
    (tokens / "jid0000000001").write_text(left, encoding="ascii")
    again = minter.mint(SHOULDER, token="jid0000000001")
    assert ID.fullmatch(again) and ncda_valid(again) and again != earlier
    assert minter.mint(SHOULDER, token="jid0000000001") == again


def test_the_counter_is_durable_before_a_token_names_its_ark(tmp_path, monkeypatch):
    state = tmp_path / "new" / "minter"
    fsynced = _fsynced_paths(monkeypatch)
    ark = LocalMinter(state).mint(SHOULDER, token="jid0000000001")
    # The counter's new value (its file, then the directory entry of its rename), and the
    # directories created for it; the token file needs no fsync of its own: one lost in a
    # crash was never saved anywhere, so it only wastes an identifier.
    counter = str(state / "99999-fk4.counter")
    assert fsynced == [str(tmp_path), str(tmp_path / "new"), counter, str(state)]
    fsynced.clear()
    assert LocalMinter(state).mint(SHOULDER, token="jid0000000001") == ark
    assert fsynced == []
    LocalMinter(state).mint(SHOULDER, token="jid0000000002")
    assert fsynced == [counter, str(state)]


def test_an_ezid_mint_whose_ark_was_not_saved_gives_the_same_ark_again(
    ezid_server, ezid_minter, tmp_path
):
    """Issue 31: a worker cut off between EZID's answer and saving the ARK in ZooKeeper;
    the next worker to take the job minted a second ARK, the first left an orphan at EZID.
    The ARK is kept under the job's token, on disk, before it is handed back."""
    first = ezid_minter(tokens=MintTokens(tmp_path)).mint(SHOULDER, token="jid0000000001")
    again = ezid_minter(tokens=MintTokens(tmp_path)).mint(SHOULDER, token="jid0000000001")
    assert again == first and len(ezid_server.minted) == 1
    other = ezid_minter(tokens=MintTokens(tmp_path)).mint(SHOULDER, token="jid0000000002")
    assert other != first and len(ezid_server.minted) == 2
    ezid_minter(tokens=MintTokens(tmp_path)).forget(SHOULDER, "jid0000000001")
    assert ezid_minter(tokens=MintTokens(tmp_path)).mint(SHOULDER, token="jid0000000001") not in (
        first,
        other,
    )


def test_an_ezid_token_is_durable_before_its_ark_is_handed_back(
    ezid_server, ezid_minter, tmp_path, monkeypatch
):
    fsynced = _fsynced_paths(monkeypatch)
    ezid_minter(tokens=MintTokens(tmp_path)).mint(SHOULDER, token="jid0000000001")
    tokens = tmp_path / "99999-fk4.tokens"
    # Written under a name no token can have, fsynced, linked as the token, then the link.
    assert fsynced[-2:] == [str(tokens / ".jid0000000001"), str(tokens)]
    assert (tokens / "jid0000000001").read_text().strip() == ezid_server.minted[0][0]


def test_of_two_attempts_minting_at_once_both_get_the_ark_remembered_first(
    ezid_server, ezid_minter, tmp_path, caplog
):
    tokens = MintTokens(tmp_path)
    first = ezid_minter(tokens=tokens).mint(SHOULDER, token="jid0000000001")
    # The other attempt had read no token, then minted: its ARK is the one not kept.
    late = ezid_minter().mint(SHOULDER)
    assert tokens.keep(SHOULDER, "jid0000000001", late) == first
    assert f"{late} was minted for jid0000000001 but not used" in caplog.text
