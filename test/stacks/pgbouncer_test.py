# PgBouncer in session and in transaction mode in front of a node, as
# docs/stacks.md's "PgBouncer" says: through both, concurrent clients'
# snowflake_nextval(), INSERT ... RETURNING, a block reserved and used
# inside one transaction, snowflake_currval() inside one transaction, and
# pgbench's three protocols (prepared statements through session mode
# only: PgBouncer 1.18 has none in transaction mode) give unique, correct
# keys;
# snowflake_currval() after an autocommit INSERT is the client's own in
# session mode, and in transaction mode is whatever the server connection
# the next statement lands on issued last: another client's ID.
#
# python3 pgbouncer_test.py WORKDIR (as the postgres account; PGBIN names
# PostgreSQL's programs).  Prints TAP (common.py).
import os
import subprocess
import sys
import threading
import traceback

from common import PGBIN, Procs, connect, finish, free_port, ok, query, run, wait_for

WORK = sys.argv[1]
procs = Procs()
SERVER = os.path.join(WORK, 'pg')
PORT = free_port()


def bouncer(db):
    return connect(host='127.0.0.1', port=PORT, dbname=db)


def setup():
    os.makedirs(SERVER)
    data = os.path.join(SERVER, 'data')
    run([f'{PGBIN}/initdb', '-D', data, '-A', 'trust', '-U', 'postgres', '--no-sync'])
    with open(os.path.join(data, 'postgresql.conf'), 'a') as f:
        f.write(f'''
listen_addresses = ''
unix_socket_directories = '{SERVER}'
shared_preload_libraries = 'snowflake'
snowflake.worker_id = 7
fsync = off
''')
    procs.datadir(data)
    run([f'{PGBIN}/pg_ctl', '-D', data, '-l', os.path.join(SERVER, 'server.log'), '-w', 'start'])
    c = connect(host=SERVER, port=5432, dbname='postgres')
    query(c, 'CREATE DATABASE shop')
    c.close()
    c = connect(host=SERVER, port=5432, dbname='shop')
    query(c, 'CREATE EXTENSION snowflake')
    query(c, '''CREATE TABLE events (id bigint PRIMARY KEY DEFAULT snowflake.snowflake_nextval(),
        client int, mode text)''')
    c.close()
    # docs/stacks.md's databases, one per pool mode; "single" has one
    # server connection, so that two clients take turns on it
    with open(os.path.join(WORK, 'userlist.txt'), 'w') as f:
        f.write('"postgres" ""\n')
    with open(os.path.join(WORK, 'pgbouncer.ini'), 'w') as f:
        f.write(f'''[databases]
session = host={SERVER} port=5432 dbname=shop pool_mode=session pool_size=8
transaction = host={SERVER} port=5432 dbname=shop pool_mode=transaction
single = host={SERVER} port=5432 dbname=shop pool_mode=transaction pool_size=1

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = {PORT}
unix_socket_dir =
auth_type = trust
auth_file = {WORK}/userlist.txt
pidfile = {WORK}/pgbouncer.pid
default_pool_size = 2
max_client_conn = 100
''')
    procs.start(['pgbouncer', os.path.join(WORK, 'pgbouncer.ini')], os.path.join(WORK, 'pgbouncer.log'))
    wait_for('PgBouncer', lambda: bouncer('session'))


def clients(db, n, fn):
    """N clients through pool DB at once, each running FN(conn, k); their
    results in order."""
    out = [None] * n
    errors = []

    def one(k):
        try:
            c = bouncer(db)
            out[k] = fn(c, k)
            c.close()
        except Exception as e:
            errors.append(repr(e))
    threads = [threading.Thread(target=one, args=(k,)) for k in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    return out


def check(name, fn):
    try:
        fn()
        ok(True, name)
    except Exception:
        ok(False, name, traceback.format_exc())


def direct(sql, params=None):
    c = connect(host=SERVER, port=5432, dbname='shop')
    try:
        return query(c, sql, params)
    finally:
        c.close()


def nextval(mode):
    def fn(c, k):
        return [query(c, 'SELECT snowflake.snowflake_nextval()')[0][0] for _ in range(250)]
    got = clients(mode, 6, fn)
    for ids in got:
        assert ids == sorted(ids), 'a client\'s IDs in order'
    flat = [i for ids in got for i in ids]
    assert len(set(flat)) == len(flat) == 1500, f'{len(flat) - len(set(flat))} repeated'


def returning(mode):
    def fn(c, k):
        return [query(c, 'INSERT INTO events (client, mode) VALUES (%s, %s) RETURNING id', (k, mode))[0][0]
                for _ in range(100)]
    got = clients(mode, 6, fn)
    for k, ids in enumerate(got):
        rows = [r[0] for r in direct('SELECT id FROM events WHERE client = %s AND mode = %s ORDER BY id',
                                     (k, mode))]
        assert rows == sorted(ids), f'client {k}: the rows hold other keys than RETURNING gave'


def block(mode):
    def fn(c, k):
        firsts = []
        for _ in range(20):
            query(c, 'BEGIN')
            [(first,)] = query(c, 'SELECT snowflake.snowflake_nextval_block(10)')
            query(c, 'INSERT INTO events (id, client, mode) SELECT g, %s, %s FROM generate_series(%s::bigint, %s) g',
                  (k, mode + ' block', first, first + 9))
            query(c, 'COMMIT')
            firsts.append(first)
        return firsts
    got = clients(mode, 6, fn)
    for k, firsts in enumerate(got):
        rows = [r[0] for r in direct('SELECT id FROM events WHERE client = %s AND mode = %s ORDER BY id',
                                     (k, mode + ' block'))]
        assert rows == [f + i for f in sorted(firsts) for i in range(10)], f'client {k}: the rows are not its blocks'


def currval_in_transaction(mode):
    def fn(c, k):
        for _ in range(50):
            query(c, 'BEGIN')
            [(mine,)] = query(c, 'INSERT INTO events (client, mode) VALUES (%s, %s) RETURNING id', (k, mode + ' tx'))
            [(cur,)] = query(c, 'SELECT snowflake.snowflake_currval()')
            query(c, 'COMMIT')
            assert cur == mine, f'client {k}: currval {cur}, its insert {mine}'
    clients(mode, 6, fn)


def currval_after_autocommit(db):
    """Two clients take turns: A inserts, B inserts, A asks currval.  Returns
    (A's key, B's key, A's currval)."""
    a, b = bouncer(db), bouncer(db)
    [(ka,)] = query(a, 'INSERT INTO events (client, mode) VALUES (1, %s) RETURNING id', (db,))
    [(kb,)] = query(b, 'INSERT INTO events (client, mode) VALUES (2, %s) RETURNING id', (db,))
    [(cur,)] = query(a, 'SELECT snowflake.snowflake_currval()')
    a.close()
    b.close()
    return ka, kb, cur


def currval_session():
    ka, kb, cur = currval_after_autocommit('session')
    assert cur == ka != kb, (ka, kb, cur)


def currval_transaction():
    ka, kb, cur = currval_after_autocommit('single')
    assert cur == kb != ka, f'A inserted {ka}, B {kb}; A\'s currval {cur}'


def pgbench():
    runs = [('session', 'simple'), ('session', 'extended'), ('session', 'prepared'),
            ('transaction', 'simple'), ('transaction', 'extended')]
    for db, protocol in runs:
        mode = f'pgbench {db} {protocol}'
        script = os.path.join(WORK, f'{db}-{protocol}.sql')
        with open(script, 'w') as f:
            f.write(f"INSERT INTO events (client, mode) VALUES (:client_id, '{mode}');\n")
        r = subprocess.run([f'{PGBIN}/pgbench', '-h', '127.0.0.1', '-p', str(PORT), '-U', 'postgres', '-n',
                            '-f', script, '-c', '4', '-j', '2', '-t', '250', '-M', protocol, db],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        assert r.returncode == 0, r.stdout
        [(n, distinct)] = direct('SELECT count(*), count(DISTINCT id) FROM events WHERE mode = %s', (mode,))
        assert n == distinct == 1000, f'{mode}: {n} rows, {distinct} keys'


try:
    setup()
    ok(True, 'a node behind PgBouncer, one pool in session mode, one in transaction mode')
    for mode in ('session', 'transaction'):
        check(f'{mode} mode: snowflake_nextval() of 6 clients at once, unique and in order per client',
              lambda: nextval(mode))
        check(f'{mode} mode: INSERT ... RETURNING gives the key the row holds', lambda: returning(mode))
        check(f'{mode} mode: a block reserved and used inside one transaction', lambda: block(mode))
        check(f'{mode} mode: snowflake_currval() inside one transaction is the client\'s own',
              lambda: currval_in_transaction(mode))
    check('session mode: snowflake_currval() after an autocommit INSERT is the client\'s own', currval_session)
    check('transaction mode: snowflake_currval() after an autocommit INSERT is another client\'s',
          currval_transaction)
    check('pgbench: simple, extended and prepared through session mode, simple and extended through transaction mode', pgbench)
    [(n, distinct)] = direct('SELECT count(*), count(DISTINCT id) FROM events')
    ok(n == distinct and n > 0, f'{n} rows, every key unique')
except Exception as e:
    ok(False, 'setting up', e)
procs.stop_all()
finish()
