"""Sign-in load for bench/auth.sh (standard library only, loopback only).

    auth_clients.py signin BASE USER PASSWORD RATE COUNT   -> sign-in latency at RATE/s
    auth_clients.py wrong BASE COUNT THREADS               -> COUNT wrong-password attempts
    auth_clients.py tokens BASE TOKEN COUNT                -> wrong tokens, right vs wrong first byte
Prints one line of key=value figures (ms).
"""
import statistics, sys, threading, time, urllib.error, urllib.parse, urllib.request


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *a, **k):
        return None


opener = urllib.request.build_opener(NoRedirect)


def post_form(url, fields):
    data = urllib.parse.urlencode(fields).encode()
    req = urllib.request.Request(url, data=data, method="POST",
                                 headers={"Content-Type": "application/x-www-form-urlencoded"})
    t = time.perf_counter()
    try:
        code = opener.open(req, timeout=30).status
    except urllib.error.HTTPError as e:
        code = e.code
    return (time.perf_counter() - t) * 1000, code


def pct(values, p):
    v = sorted(values)
    return v[min(len(v) - 1, int(round(p / 100 * (len(v) - 1))))]


def signin(base, user, password, rate, count):
    lat, codes, threads = [], [], []
    def one():
        ms, code = post_form(base + "/console/sign-in", {"name": user, "password": password})
        lat.append(ms); codes.append(code)
    start = time.perf_counter()
    for i in range(count):
        while time.perf_counter() < start + i / rate:
            time.sleep(0.001)
        th = threading.Thread(target=one); th.start(); threads.append(th)
    for th in threads:
        th.join()
    ok = sum(1 for c in codes if c == 303)
    print(f"signins={count} ok={ok} p50_ms={pct(lat, 50):.1f} p95_ms={pct(lat, 95):.1f} max_ms={max(lat):.1f}")


def wrong(base, count, nthreads):
    codes, lat, lock = [], [], threading.Lock()
    def worker(k):
        for i in range(k, count, nthreads):
            ms, code = post_form(base + "/console/sign-in", {"name": f"user{i % 40}", "password": "not the password"})
            with lock:
                codes.append(code); lat.append(ms)
    ths = [threading.Thread(target=worker, args=(k,)) for k in range(nthreads)]
    for t in ths: t.start()
    for t in ths: t.join()
    print(f"attempts={count} refused_401={codes.count(401)} throttled_429={codes.count(429)} p95_ms={pct(lat, 95):.1f}")


def tokens(base, token, count):
    head, secret = token.rsplit("_", 1)
    right_first = secret[0] + ("0" if secret[1] != "0" else "1") * 63
    wrong_first = ("0" if secret[0] != "0" else "1") + secret[1:]
    times = {"right_first_byte": [], "wrong_first_byte": []}
    for i in range(count):
        for name, s in (("right_first_byte", right_first), ("wrong_first_byte", wrong_first)):
            req = urllib.request.Request(base + "/api/v1/whoami", headers={"Authorization": f"Bearer {head}_{s}"})
            t = time.perf_counter()
            try:
                opener.open(req, timeout=10).read()
            except urllib.error.HTTPError as e:
                e.read()
            times[name].append((time.perf_counter() - t) * 1e6)
    a, b = statistics.median(times["right_first_byte"]), statistics.median(times["wrong_first_byte"])
    print(f"pairs={count} median_us_right_first_byte={a:.1f} median_us_wrong_first_byte={b:.1f} diff_us={a - b:.1f}")


if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "signin":
        signin(sys.argv[2], sys.argv[3], sys.argv[4], float(sys.argv[5]), int(sys.argv[6]))
    elif cmd == "wrong":
        wrong(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
    elif cmd == "tokens":
        tokens(sys.argv[2], sys.argv[3], int(sys.argv[4]))
