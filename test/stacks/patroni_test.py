# A Patroni cluster of three members with etcd as its store, all on the
# loopback, with the dynamic configuration of docs/stacks.md's "Patroni"
# (taken from there, with shorter times), and snowflake
# generating under a load of clients (common.Load) through a switchover, a
# failover (the primary's machine killed: Patroni and every server process
# at once; the old primary comes back through pg_rewind and is switched
# back to), a member
# re-initialised (patronictl reinit) and then made primary, a pause with
# the primary restarted by hand and a resume, and a worker-id change
# through Patroni's dynamic configuration (patronictl edit-config -p)
# followed by a switchover; then a standby cluster with a worker id of its
# own follows it and is promoted while it runs on.  Every acknowledged ID is kept (ids.tsv in
# the work directory): none is acknowledged twice, none is at or below an
# ID of the same worker id acknowledged before it was asked for, no
# member refuses (a refusal is judged by its SQLSTATE and the reason of
# snowflake_status), and every acknowledged row is on the last primary.
#
# python3 patroni_test.py WORKDIR (as the postgres account; PGBIN names
# PostgreSQL's programs).  Prints TAP (common.py).
import copy
import json
import os
import re
import sys
import time
import urllib.request

import yaml

from common import (PGBIN, Load, Procs, Stop, check_ids, connect, finish, free_port, kill_postmaster,
                    log, ok, outcome, query, run, step, wait_for, worker_of, write_acks)

WORK = sys.argv[1]
SCOPE = 'shop'
DR_SCOPE = 'shop-dr'
NAMES = ['pg1', 'pg2', 'pg3']
procs = Procs()

# docs/stacks.md's Patroni configuration (SNOWFLAKE_DOCS names the folder):
# what the cluster keeps in etcd, the same for every member (bootstrap.dcs,
# then patronictl edit-config), with shorter times, so that a failover
# comes within the test, and both standbys synchronous, so that a
# switchover may go to either
with open(os.path.join(os.environ['SNOWFLAKE_DOCS'], 'stacks.md')) as f:
    doc = f.read()
[block] = [b for b in re.findall(r'^```yaml\n(.*?)^```$', doc, re.M | re.S) if 'snowflake.worker_id' in b]
DCS = yaml.safe_load(block)['bootstrap']['dcs']
DCS.update(ttl=20, loop_wait=2, retry_timeout=5, synchronous_node_count=2)

etcd_port = free_port()
members = {}
for name in NAMES + ['dr1']:
    d = os.path.join(WORK, name)
    os.makedirs(d, exist_ok=True)
    members[name] = {'dir': d, 'data': os.path.join(d, 'data'), 'pg': free_port(), 'api': free_port(),
                     'conf': os.path.join(d, 'patroni.yml'), 'proc': None}


def member_conf(name, scope=SCOPE, dcs=DCS):
    m = members[name]
    return {
        'scope': scope,
        'name': name,
        'restapi': {'listen': f'127.0.0.1:{m["api"]}', 'connect_address': f'127.0.0.1:{m["api"]}'},
        'etcd3': {'hosts': f'127.0.0.1:{etcd_port}'},
        'bootstrap': {'dcs': dcs, 'initdb': [{'encoding': 'UTF8'}, {'locale': 'C.UTF-8'}]},
        'postgresql': {
            'listen': f'127.0.0.1:{m["pg"]}',
            'connect_address': f'127.0.0.1:{m["pg"]}',
            'data_dir': m['data'],
            'bin_dir': PGBIN,
            'pgpass': os.path.join(m['dir'], 'pgpass'),
            'authentication': {'superuser': {'username': 'postgres'},
                               'replication': {'username': 'postgres'},
                               'rewind': {'username': 'postgres'}},
            'parameters': {'unix_socket_directories': m['dir'], 'fsync': 'off'},
            'pg_hba': ['local all all trust', 'host all all 127.0.0.1/32 trust',
                       'host replication all 127.0.0.1/32 trust'],
        },
    }


def start_member(name, **conf):
    m = members[name]
    with open(m['conf'], 'w') as f:
        yaml.safe_dump(member_conf(name, **conf), f)
    m['proc'] = procs.start(['patroni', m['conf']], os.path.join(m['dir'], 'patroni.log'))
    procs.datadir(m['data'])


def patronictl(*args):
    return run(['patronictl', '-c', members['pg1']['conf'], *args])


def cluster():
    """Patroni's view of the cluster, from the REST API of the first member
    that answers: {name: member}."""
    for m in (members[n] for n in NAMES):
        if m['proc'] is None or m['proc'].poll() is not None:
            continue
        try:
            with urllib.request.urlopen(f'http://127.0.0.1:{m["api"]}/cluster', timeout=3) as r:
                return {x['name']: x for x in json.load(r)['members']}
        except OSError:
            continue
    return {}


def leader():
    return next((n for n, x in cluster().items() if x['role'] == 'leader' and x['state'] == 'running'), None)


def healthy(n=3):
    """N members running, a leader, every other one a synchronous standby
    on the leader's timeline."""
    c = cluster()
    running = [x for x in c.values() if x['state'] in ('running', 'streaming')]
    lead = [x for x in running if x['role'] == 'leader']
    sync = [x for x in running if x['role'] == 'sync_standby']
    if len(running) != n or len(lead) != 1 or len(sync) != n - 1:
        return False
    return all(x.get('timeline') == lead[0].get('timeline') and x.get('lag', 0) != 'unknown'
               for x in running)


def member_conn(name, dbname='shop'):
    return connect(host='127.0.0.1', port=members[name]['pg'], dbname=dbname)


APP = {'host': ','.join('127.0.0.1' for _ in NAMES), 'port': ','.join(str(members[n]['pg']) for n in NAMES),
       'dbname': 'shop', 'target_session_attrs': 'read-write'}
load = Load(APP, clients=3, seed=42)


def on(name):
    port = members[name]['pg']
    return lambda a: a.port == port


def bootstrap():
    etcd_dir = os.path.join(WORK, 'etcd')
    peer = free_port()
    procs.start(['etcd', '--name', 'e1', '--data-dir', etcd_dir,
                 '--listen-client-urls', f'http://127.0.0.1:{etcd_port}',
                 '--advertise-client-urls', f'http://127.0.0.1:{etcd_port}',
                 '--listen-peer-urls', f'http://127.0.0.1:{peer}',
                 '--initial-advertise-peer-urls', f'http://127.0.0.1:{peer}',
                 '--initial-cluster', f'e1=http://127.0.0.1:{peer}'],
                os.path.join(WORK, 'etcd.log'))
    wait_for('etcd', lambda: urllib.request.urlopen(f'http://127.0.0.1:{etcd_port}/health', timeout=2).read())
    # the first member bootstraps the cluster, the others copy it
    start_member('pg1')
    wait_for('pg1 to lead', lambda: leader() == 'pg1')
    start_member('pg2')
    start_member('pg3')
    wait_for('three members streaming, both standbys synchronous', healthy)
    c = member_conn('pg1', 'postgres')
    query(c, 'CREATE DATABASE shop')
    c.close()
    c = member_conn('pg1')
    query(c, 'CREATE EXTENSION snowflake')
    query(c, 'CREATE TABLE events (id bigint PRIMARY KEY DEFAULT snowflake.snowflake_nextval(), client int)')
    c.close()
    load.start()
    load.wait_acks('by pg1', 200, on('pg1'))


def switchover(to):
    was = leader()
    patronictl('switchover', SCOPE, '--leader', was, '--candidate', to, '--force')
    wait_for(f'{to} to lead', lambda: leader() == to)
    load.wait_acks(f'by {to}', 200, on(to))
    wait_for(f'{was} back, streaming from {to}', healthy)


def failover():
    was = leader()
    log(f'killing {was}: its Patroni and its server')
    procs.kill(members[was]['proc'])
    kill_postmaster(members[was]['data'])
    now = wait_for('another member to lead', lambda: (lambda n: n if n not in (None, was) else None)(leader()))
    log(f'{now} leads')
    load.wait_acks(f'by {now}', 200, on(now))
    # the old primary comes back: Patroni rewinds it and follows the new
    # one; then it is made primary again
    start_member(was)
    wait_for(f'{was} back as a replica', healthy)
    switchover(was)


def reinit():
    lead = leader()
    replica = next(n for n in NAMES if n != lead)
    patronictl('reinit', SCOPE, replica, '--force', '--wait')
    wait_for(f'{replica} streaming again', healthy)
    # the new copy is the primary's node: made primary, it generates at once
    switchover(replica)


def pause_resume():
    lead = leader()
    patronictl('pause', SCOPE, '--wait')
    # maintenance by hand while Patroni watches only: a restart
    run([f'{PGBIN}/pg_ctl', '-D', members[lead]['data'], '-m', 'fast', '-w', 'restart',
         '-l', os.path.join(members[lead]['dir'], 'restart.log')])
    restarted = time.monotonic()
    load.wait_acks(f'by {lead} after its restart in pause', 200, lambda a: a.port == members[lead]['pg']
                   and a.sent > restarted)
    patronictl('resume', SCOPE, '--wait')
    wait_for('the cluster healthy after resume', healthy)
    assert leader() == lead, f'the leader moved from {lead} to {leader()} while paused'
    load.wait_acks(f'by {lead} after resume', 200, on(lead))


def worker_change():
    patronictl('edit-config', SCOPE, '--force', '-p', 'snowflake.worker_id=8')

    def everywhere():
        for n in NAMES:
            c = member_conn(n)
            try:
                [(w,)] = query(c, "SELECT current_setting('snowflake.worker_id')")
            finally:
                c.close()
            if w != '8':
                return False
        return True
    wait_for('worker id 8 on every member', everywhere)
    lead = leader()
    load.wait_acks(f'by {lead} under worker id 8', 200, lambda a: worker_of(a.id) == 8)
    # every member is the node of worker id 8, held by nothing: the leader
    # ready, the others standbys in recovery
    for n in NAMES:
        c = member_conn(n)
        [(state, reason)] = query(c, 'SELECT state, reason FROM snowflake.snowflake_status')
        c.close()
        want = ('ready', None) if n == lead else ('standby', 'in_recovery')
        assert (state, reason) == want, f'{n}: snowflake_status says {state}/{reason}'
    # a standby that had the change replayed promotes under it
    switchover(next(n for n in NAMES if n != lead))


def standby_cluster():
    """docs/stacks.md's standby cluster: a cluster of its own that follows
    this one's primary, with a worker id of its own in its dynamic
    configuration; promoted while this cluster runs on, it generates under
    that one at once."""
    lead = leader()
    dcs = copy.deepcopy(DCS)
    dcs['postgresql']['parameters']['snowflake.worker_id'] = 9
    dcs['standby_cluster'] = {'host': '127.0.0.1', 'port': members[lead]['pg']}
    start_member('dr1', scope=DR_SCOPE, dcs=dcs)
    dr = members['dr1']

    def role():
        try:
            with urllib.request.urlopen(f'http://127.0.0.1:{dr["api"]}/patroni', timeout=3) as r:
                return json.load(r).get('role')
        except OSError:
            return None
    wait_for('the standby cluster\'s leader', lambda: role() == 'standby_leader')
    c = member_conn(lead)
    [(lsn,)] = query(c, 'SELECT pg_current_wal_lsn()')
    c.close()

    def caught_up():
        c = member_conn('dr1')
        try:
            return query(c, 'SELECT pg_last_wal_replay_lsn() >= %s', (lsn,))[0][0]
        finally:
            c.close()
    wait_for('the standby cluster to replay the primary\'s WAL', caught_up)
    c = member_conn('dr1')
    [(w, reason)] = query(c, "SELECT current_setting('snowflake.worker_id'), reason FROM snowflake.snowflake_status")
    c.close()
    assert (w, reason) == ('9', 'in_recovery'), f'the standby cluster: worker id {w}, {reason}'
    run(['patronictl', '-c', dr['conf'], 'edit-config', DR_SCOPE, '--force', '-s', 'standby_cluster=null'])
    wait_for('the standby cluster promoted', lambda: role() in ('master', 'primary'))
    c = member_conn('dr1')
    got = wait_for('the promoted standby cluster out of recovery',
                   lambda: not query(c, 'SELECT pg_is_in_recovery()')[0][0] and outcome(c))
    assert got[0] == 'generated', f'the promoted standby cluster: {got}'
    ids = [query(c, 'INSERT INTO events (client) VALUES (-1) RETURNING id')[0][0] for _ in range(200)]
    c.close()
    assert ids == sorted(ids) and len(set(ids)) == 200, 'its IDs out of order'
    assert {worker_of(i) for i in ids} == {9}, f'worker ids {sorted({worker_of(i) for i in ids})}'
    assert not set(ids) & {a.id for a in load.acks}, 'IDs of both clusters'
    # the cluster it followed generates on, unaffected
    load.wait_acks(f'by {leader()} beside the promoted standby cluster', 200, on(leader()))


t0 = time.monotonic()
try:
    params = DCS['postgresql']['parameters']
    ok(params.get('shared_preload_libraries') == 'snowflake' and params.get('snowflake.worker_id') == 7,
       "docs/stacks.md's dynamic configuration: the library preloaded, worker id 7", params)
    step('a cluster of three members on etcd, snowflake generating on the primary', bootstrap)
    step('a switchover, under load', switchover, 'pg2')
    step('a failover: the primary killed, another one promoted; the old one rewound, back, and primary again',
         failover)
    step('a member re-initialised (patronictl reinit), then made primary', reinit)
    step('pause, the primary restarted by hand, resume', pause_resume)
    step('the worker id changed through the dynamic configuration, then a switchover', worker_change)
    step('a standby cluster with a worker id of its own, promoted while this one runs on', standby_cluster)
except Stop:
    pass
finally:
    load.stop()
    acks = list(load.acks)
    write_acks(os.path.join(WORK, 'ids.tsv'), acks)
    log(f'{len(acks)} IDs acknowledged, {load.unavailable} times a client found no primary, '
        f'{time.monotonic() - t0:.0f} s')

ok(not load.refusals, 'no member refused to generate',
   '\n'.join(f'{code} ({reason}) on port {port}, {op}' for code, reason, port, op, _ in load.refusals[:20]))
ok(not load.errors, 'no other error', '\n'.join(map(str, load.errors[:20])))
ok(len(acks) > 0, f'IDs acknowledged: {len(acks)}, under worker ids '
   f'{sorted({worker_of(a.id) for a in acks})}')
wrong = check_ids(acks)
ok(not wrong, 'no ID acknowledged twice, none at or below one of its worker id acknowledged before it',
   '\n'.join(wrong[:20]))
wrong_all = check_ids(acks, per_worker=False)
ok(not wrong_all, 'none at or below any ID acknowledged before it, across the worker-id change',
   '\n'.join(wrong_all[:20]))


def all_rows():
    lead = leader()
    c = member_conn(lead)
    rows = {r[0] for r in query(c, 'SELECT id FROM events')}
    c.close()
    return rows


try:
    rows = wait_for('a leader to read', all_rows, timeout=60)
    missing = [a.id for a in acks if a.id not in rows]
    ok(not missing, 'every acknowledged ID is on the last primary (synchronous_mode)',
       f'{len(missing)} missing, such as {missing[:10]}')
except Exception as e:
    ok(False, 'every acknowledged ID is on the last primary (synchronous_mode)', e)

procs.stop_all()
finish()
