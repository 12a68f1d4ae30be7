"""Read-replica choice without a database: WAL positions, lag, which replica a read may use."""
from __future__ import annotations

import pytest

from core.replicas import ReplicaHealth, candidates, format_lsn, lag_seconds, parse_lsn, usable


def test_wal_positions_parse_compare_and_print_as_postgresql_writes_them():
    assert parse_lsn("0/16B3748") == 0x16B3748
    assert parse_lsn("1/0") > parse_lsn("0/FFFFFFFF")
    for text in ("0/0", "0/3000148", "A/1", "FFFFFFFF/FFFFFFFF"):
        assert format_lsn(parse_lsn(text)) == text


@pytest.mark.parametrize("bad", ["", "16B3748", "0/", "/1", "x/1", "0/1/2", "100000000/0", "0/ 1 2"])
def test_a_malformed_wal_position_is_refused_with_its_shape(bad):
    with pytest.raises(ValueError, match="looks like 0/16B3748"):
        parse_lsn(bad)


SAMPLES = [(10.0, 100), (11.0, 200), (12.0, 300)]  # (seconds, primary WAL position), oldest first


def test_a_replica_that_replayed_everything_has_no_lag_however_old_the_samples():
    assert lag_seconds(SAMPLES, 300, now=50.0) == 0.0
    assert lag_seconds(SAMPLES, 999, now=50.0) == 0.0  # ahead of the last sample: still none


def test_lag_is_the_age_of_the_oldest_primary_position_not_yet_replayed():
    assert lag_seconds(SAMPLES, 150, now=12.5) == pytest.approx(1.5)  # misses the 11.0 sample
    assert lag_seconds(SAMPLES, 99, now=12.5) == pytest.approx(2.5)  # misses all of them
    assert lag_seconds(SAMPLES, 200, now=12.5) == pytest.approx(0.5)


def test_a_replica_that_never_replayed_is_infinitely_behind():
    assert lag_seconds(SAMPLES, None, now=12.0) == float("inf")


def health(up=True, lag=0.0):
    return ReplicaHealth("r", up=up, lag_s=lag, problem=None if up else "down")


def test_only_replicas_that_answer_and_keep_up_are_used():
    replicas = [health(), health(up=False), health(lag=9.0), health(lag=5.0)]
    assert usable(replicas, max_lag_s=5.0) == [0, 3]
    assert usable([health(up=False)], max_lag_s=5.0) == []


def test_reads_take_the_usable_replicas_in_turn():
    replicas = [health(), health(up=False), health()]
    assert candidates(replicas, 5.0, turn=0) == [0, 2]
    assert candidates(replicas, 5.0, turn=1) == [2, 0]
    assert candidates(replicas, 5.0, turn=2) == [0, 2]


def test_a_request_sticks_to_its_replica_while_it_can_serve_and_moves_on_when_it_cannot():
    replicas = [health(), health()]
    assert candidates(replicas, 5.0, turn=0, sticky=1) == [1]
    replicas[1] = health(up=False)
    assert candidates(replicas, 5.0, turn=0, sticky=1) == [0]


def test_with_no_usable_replica_there_is_nothing_to_try_and_reads_go_to_the_primary():
    assert candidates([health(up=False), health(lag=60.0)], 5.0, turn=3) == []
    assert candidates([], 5.0, turn=0) == []
