# pgBackRest with a real repository (posix, on local disk), set up as
# docs/stacks.md's "pgBackRest" says: a node (worker id 7) that archives
# into it, a full and an incremental backup, a standby restored from the
# repository (--type=standby) that streams from the node as its synchronous
# standby, and then the node lost (stopped at once, its last segment not
# archived) and replaced, one node after another, each lost in turn: the
# standby promoted (it generates with no step), and restores to a time (on
# a host whose clock is 150 s behind), to a named restore point, to the end
# of a backup (--type=immediate), and to the end of the archive with
# --delta over the data directory of the restore before.  Each restore
# holds back (55S01, recovery_signal); a confirmation without a floor, or
# with a stop time before the last ID it knows of, is refused (22004,
# 22023); confirmed with the time the node it replaces stopped, it
# generates (the one whose clock is behind once max_run_ahead_ms is
# raised, as its refusal's hint says), and no ID it issues is at or below
# one any node issued before.  Each restore holds the rows up to its
# target and none after.
#
# python3 pgbackrest_test.py WORKDIR (as the postgres account; PGBIN names
# PostgreSQL's programs).  Prints TAP (common.py).
import datetime
import glob
import os
import re
import sys
import time

from common import (PGBIN, Procs, Stop, connect, finish, log, ok, outcome, query, run, step, wait_for)

WORK = sys.argv[1]
CONF = os.path.join(WORK, 'pgbackrest.conf')
STANZA = 'shop'
procs = Procs()
LIBFAKETIME = (glob.glob('/usr/lib/*/faketime/libfaketime.so.1') + [None])[0]

# docs/stacks.md's repository and stanza, with this test's paths
with open(CONF, 'w') as f:
    f.write(f'''[global]
repo1-path={WORK}/repo
repo1-retention-full=2
start-fast=y
log-path={WORK}/log
lock-path={WORK}/lock
log-level-console=warn

[{STANZA}]
pg1-path={WORK}/a/data
pg1-socket-path={WORK}/a
''')

issued = []          # every ID acknowledged, by every node
noted = {}          # the backup, the time and the stop time the steps note


def pgbackrest(*args):
    return run(['pgbackrest', f'--config={CONF}', f'--stanza={STANZA}', *args])


def now_utc():
    return datetime.datetime.now(datetime.timezone.utc).isoformat(sep=' ')


def start(name, clock=None):
    """Start the server of NAME; with CLOCK, under libfaketime, its clock
    that many seconds off ("-150"), the commands it runs (restore_command)
    on the real one."""
    d = os.path.join(WORK, name)
    data = os.path.join(d, 'data')
    procs.datadir(data)
    env = dict(os.environ)
    if clock is not None:
        assert LIBFAKETIME, 'libfaketime is not installed (Debian package faketime)'
        with open(os.path.join(data, 'postgresql.auto.conf')) as f:
            [cmd] = re.findall(r"^restore_command = '(.*)'$", f.read(), re.M)
        with open(os.path.join(data, 'postgresql.auto.conf'), 'a') as f:
            f.write(f"restore_command = 'env -u LD_PRELOAD {cmd}'\n")
        env.update(LD_PRELOAD=LIBFAKETIME, FAKETIME=clock, FAKETIME_DONT_FAKE_MONOTONIC='1')
    run([f'{PGBIN}/pg_ctl', '-D', data, '-l', os.path.join(d, 'server.log'), '-w', '-t', '120',
         '-o', f'-c unix_socket_directories={d} -c listen_addresses=', 'start'], env=env)


def stop(name, mode='fast'):
    run([f'{PGBIN}/pg_ctl', '-D', os.path.join(WORK, name, 'data'), '-m', mode, '-w', 'stop'])
    return now_utc()


def conn(name):
    return connect(host=os.path.join(WORK, name), port=5432, dbname='shop')


def generate(name, phase, n=200):
    """N rows of PHASE on node NAME, each key from the default, one
    statement each; every ID acknowledged is kept."""
    c = conn(name)
    ids = []
    for _ in range(n):
        [(i,)] = query(c, 'INSERT INTO events (phase) VALUES (%s) RETURNING id', (phase,))
        ids.append(i)
    c.close()
    assert ids == sorted(ids) and len(set(ids)) == n, f'{name} issued IDs out of order'
    issued.extend(ids)
    return ids


def phases(name):
    c = conn(name)
    rows = dict(query(c, 'SELECT phase, count(*) FROM events GROUP BY phase'))
    c.close()
    return rows


def archived(name):
    """Every WAL segment up to the current one of NAME switched out and in
    the repository."""
    c = conn(name)
    [(seg,)] = query(c, 'SELECT pg_walfile_name(pg_switch_wal())')
    wait_for(f'{seg} archived', lambda: query(
        c, 'SELECT last_archived_wal >= %s FROM pg_stat_archiver', (seg,))[0][0])
    c.close()


def the_node():
    d = os.path.join(WORK, 'a')
    os.makedirs(d)
    run([f'{PGBIN}/initdb', '-D', os.path.join(d, 'data'), '-A', 'trust', '-U', 'postgres', '--no-sync'])
    with open(os.path.join(d, 'data', 'postgresql.conf'), 'a') as f:
        f.write(f'''
shared_preload_libraries = 'snowflake'
snowflake.worker_id = 7
snowflake.max_run_ahead_ms = 1000
wal_level = replica
archive_mode = on
archive_command = 'pgbackrest --config={CONF} --stanza={STANZA} archive-push %p'
fsync = off
''')
    start('a')
    c = connect(host=d, port=5432, dbname='postgres')
    query(c, 'CREATE DATABASE shop')
    c.close()
    c = conn('a')
    query(c, 'CREATE EXTENSION snowflake')
    query(c, 'CREATE TABLE events (id bigint PRIMARY KEY DEFAULT snowflake.snowflake_nextval(), phase text)')
    c.close()
    pgbackrest('stanza-create')
    pgbackrest('check')


def backups():
    generate('a', 'before full')
    pgbackrest('--type=full', 'backup')
    generate('a', 'before incr')
    pgbackrest('--type=incr', 'backup')
    info = pgbackrest('info')
    labels = re.findall(r'^\s*(?:full|incr) backup: (\S+)', info, re.M)
    assert len(labels) == 2 and labels[1].endswith('I'), info
    noted['incr'] = labels[1]


def standby():
    # a standby restored from the repository, streaming from the node
    # a standby restored from the repository, streaming from the node, its
    # synchronous standby: every commit the node acknowledges reached it
    pgbackrest(f'--pg1-path={WORK}/e/data', '--type=standby', '--archive-mode=off',
               f'--recovery-option=primary_conninfo=host={WORK}/a port=5432 user=postgres application_name=e',
               'restore')
    start('e')
    c = conn('a')
    query(c, "ALTER SYSTEM SET synchronous_standby_names = 'e'")
    query(c, 'SELECT pg_reload_conf()')
    wait_for('the standby streaming, synchronous', lambda: query(
        c, "SELECT sync_state FROM pg_stat_replication WHERE application_name = 'e'") == [('sync',)])
    c.close()
    assert outcome(conn('e'))[0] == '25006', 'a standby refuses to generate'


def history():
    generate('a', 'before time')
    c = conn('a')
    [(noted['time'],)] = query(c, 'SELECT now()::text')
    c.close()
    generate('a', 'before point')
    c = conn('a')
    query(c, "SELECT pg_create_restore_point('before_upgrade')")
    c.close()
    generate('a', 'before switch')
    archived('a')
    # the node's last IDs: in its WAL, streamed to the standby, never
    # archived, as the node dies
    generate('a', 'last')
    noted['stopped'] = stop('a', 'immediate')
    log(f'the node stopped at {noted["stopped"]}, its last ID {max(issued)}')


def promote_standby():
    # the standby replays every commit the node acknowledged
    wait_for('the standby to replay the node\'s last WAL', lambda: phases('e').get('last') == 200)
    run([f'{PGBIN}/pg_ctl', '-D', os.path.join(WORK, 'e', 'data'), '-w', 'promote'])
    top = max(issued)
    got = outcome(conn('e'))
    assert got[0] == 'generated', f'the promoted standby: {got}'
    issued.append(got[1][0][0])
    ids = generate('e', 'after e')
    assert min(ids) > top, f'the promoted standby issued {min(ids)}, at or below {top}'
    noted['stopped'] = stop('e')


# the reasons snowflake_status gives for a clock behind the node's IDs
CLOCK_REASONS = ('clock_back', 'clock_back_long', 'clock_back_far', 'ahead_of_clock', 'ahead_far')


def restored(name, want, *args, delta=False, clock=None):
    """Restore into NAME (over what is there with --delta), start it (with
    its clock CLOCK seconds off): it holds back until confirmed with the
    time the node it replaces stopped, then generates above every ID
    issued before (with a clock behind that by more than max_run_ahead_ms
    lets it run ahead, once that is raised, as the refusal's hint says);
    it has the rows of the phases WANT and of no other."""
    if not delta:
        os.makedirs(os.path.join(WORK, name))
    pgbackrest(f'--pg1-path={WORK}/{name}/data', '--archive-mode=off', *args, 'restore')
    start(name, clock)
    c = conn(name)
    wait_for(f'{name} to end its recovery', lambda: not query(c, 'SELECT pg_is_in_recovery()')[0][0])
    got = outcome(c)
    assert got == ('55S01', 'recovery_signal'), f'the restore: {got}'
    got = outcome(c, 'SELECT snowflake.snowflake_confirm_node()')
    assert got[0] == '22004', f'a confirmation without a floor: {got}'
    got = outcome(c, 'SELECT snowflake.snowflake_confirm_node(stopped_at => %s)', ('2000-01-01 00:00+00',))
    assert got[0] == '22023', f'a stop time before what the restore knows: {got}'
    top = max(issued)
    [(floor,)] = query(c, 'SELECT snowflake.snowflake_confirm_node(stopped_at => %s)', (noted['stopped'],))
    [(state, reason)] = query(c, 'SELECT state, reason FROM snowflake.snowflake_status')
    # confirmed, it is ready; on a clock behind the IDs it continues above,
    # the view says what the next call will: blocked by the clock
    if clock is None:
        assert (state, reason) == ('ready', None), f'confirmed: {state}/{reason}'
    else:
        assert state == 'blocked' and reason in CLOCK_REASONS, f'confirmed, {clock} s behind: {state}/{reason}'
    assert floor >= top, f'confirmed above {floor}, below the last ID {top}'
    have = phases(name)
    assert sorted(have) == sorted(want), f'the restore holds {have}, not the phases {want}'
    if clock is not None:
        # the clock's refusal: behind the IDs the node must continue above
        got = outcome(c)
        assert got[0] in ('55S05', '55S06') and got[1] in CLOCK_REASONS, f'{clock} s behind the node it replaces: {got}'
        query(c, 'ALTER SYSTEM SET snowflake.max_run_ahead_ms = 300000')
        query(c, 'SELECT pg_reload_conf()')

        def released():
            got = outcome(c)
            assert got[0] in ('generated', '55S05', '55S06'), got
            if got[0] == 'generated':
                issued.append(got[1][0][0])
                assert got[1][0][0] > top, f'{name} issued {got[1][0][0]}, at or below {top}'
                return True
        wait_for('max_run_ahead_ms raised in force', released)
    c.close()
    ids = generate(name, f'after {name}')
    assert min(ids) > top, f'{name} issued {min(ids)}, at or below {top}'
    noted['stopped'] = stop(name)


t0 = time.monotonic()
try:
    step('a node archiving into a pgBackRest repository (stanza-create, check)', the_node)
    step('a full and an incremental backup', backups)
    step('a standby restored from the repository (--type=standby) streams from the node', standby)
    step('the node generates; a time noted, a restore point made; it stops, its last segment not archived',
         history)
    step('the standby promoted: generates with no step, above the node\'s IDs', promote_standby)
    step('a restore to a time on a host whose clock is 150 s behind: held back, released by its hints, '
         'above every ID before', restored,
         'b', ['before full', 'before incr', 'before time'], '--type=time', f'--target={noted.get("time")}',
         '--target-action=promote', clock='-150')
    step('a restore to a named restore point: the same', restored,
         'c', ['before full', 'before incr', 'before time', 'before point'], '--type=name',
         '--target=before_upgrade', '--target-action=promote')
    step('a restore to the end of the incremental backup (--type=immediate): the same', restored,
         'd', ['before full', 'before incr'], '--type=immediate', f'--set={noted.get("incr")}',
         '--target-action=promote')
    step('a restore to the end of the archive, --delta over the last restore: the same', restored,
         'd', ['before full', 'before incr', 'before time', 'before point', 'before switch'], '--delta',
         delta=True)
except Stop:
    pass
log(f'{len(issued)} IDs issued, {time.monotonic() - t0:.0f} s')
ok(len(issued) == len(set(issued)), f'no ID issued twice, of {len(issued)}')
procs.stop_all()
finish()
