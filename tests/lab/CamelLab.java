// A Camel-shaped lab with a real Jolokia: no Camel runtime can be installed here, so this
// small program registers MBeans under Camel 4's object names with Camel's attribute and
// operation names (ManagedRoute, ManagedProcessor; see the Camel JMX documentation,
// https://camel.apache.org/manual/jmx.html), serves them through Jolokia's own protocol
// handler (Debian's libjolokia-core-java 1.7.1) on the JDK's HTTP server, and serves a
// real HTTP endpoint whose steps take real time.
//
// Route "orders" of context "shop", route group "shop-api" (GET /orders[?channel=store]),
// its steps as Camel numbers them (index: depth-first position, level: nesting depth):
//   from(platform-http:/orders)                  [the route itself]
//   0 L1 log1        log("order received")        ~0 ms
//   1 L1 choice1     choice()
//   2 L2   when1       when(channel != store)
//   3 L3     to1         to(http://legacy/stock)   sleeps LEGACY_MS behind a pool of POOL
//                                                   permits: the step that gives way
//   4 L2   otherwise1  otherwise()
//   5 L3     to2         to(caffeine-cache://stock) ~0 ms
//   6 L1 split1      split(body())                the order's 3 lines
//   7 L2   marshal1    marshal().json()           ~MARSHAL_MS of CPU per line
// Route "audit" (GET /audit), group "ops": one step, log2, always quick.
//
// Operations on a ManagedRoute (start, stop, suspend, resume, reset) are obeyed: a route
// not Started answers 503 and counts nothing; reset zeroes its and its steps' statistics.
// Like Camel's, `stop` and `reset` are overloaded (stop(long timeout), reset(boolean
// includeProcessors)), so a Jolokia client must give the signature.
//
//   javac -cp /usr/share/java/jolokia-core.jar:/usr/share/java/json-simple.jar CamelLab.java
//   java -cp .:/usr/share/java/jolokia-core.jar:/usr/share/java/json-simple.jar \
//        CamelLab PORT [POOL=4] [LEGACY_MS=20] [MARSHAL_MS=1]
//
// Prints "listening PORT" once ready; Jolokia at http://127.0.0.1:PORT/jolokia.

import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import java.io.IOException;
import java.io.OutputStream;
import java.lang.management.ManagementFactory;
import java.net.InetSocketAddress;
import java.net.URLDecoder;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Executors;
import java.util.concurrent.Semaphore;
import java.util.concurrent.atomic.AtomicLong;
import javax.management.MBeanServer;
import javax.management.ObjectName;
import javax.management.StandardMBean;
import org.jolokia.backend.BackendManager;
import org.jolokia.config.ConfigKey;
import org.jolokia.config.Configuration;
import org.jolokia.http.HttpRequestHandler;
import org.jolokia.restrictor.AllowAllRestrictor;
import org.jolokia.util.LogHandler;
import org.json.simple.JSONAware;

public class CamelLab {
    /** The statistics Camel keeps per route and per processor (times in ms). */
    public static class Stats {
        final AtomicLong total = new AtomicLong();
        final AtomicLong completed = new AtomicLong();
        final AtomicLong failed = new AtomicLong();
        final AtomicLong inflight = new AtomicLong();
        final AtomicLong totalTime = new AtomicLong();
        final AtomicLong maxTime = new AtomicLong();
        final AtomicLong minTime = new AtomicLong(Long.MAX_VALUE);
        volatile long lastCompleted = 0;
        volatile long lastFailure = 0;

        void begin() {
            inflight.incrementAndGet();
        }

        void end(long ms, boolean ok) {
            inflight.decrementAndGet();
            total.incrementAndGet();
            if (ok) {
                completed.incrementAndGet();
                totalTime.addAndGet(ms);
                maxTime.accumulateAndGet(ms, Math::max);
                minTime.accumulateAndGet(ms, Math::min);
                lastCompleted = System.currentTimeMillis();
            } else {
                failed.incrementAndGet();
                lastFailure = System.currentTimeMillis();
            }
        }

        void reset() {
            total.set(0);
            completed.set(0);
            failed.set(0);
            totalTime.set(0);
            maxTime.set(0);
            minTime.set(Long.MAX_VALUE);
        }

        long mean() {
            long c = completed.get();
            return c == 0 ? 0 : totalTime.get() / c;
        }
    }

    public interface ManagedRouteMBean {
        String getCamelId();
        String getRouteId();
        String getRouteGroup();
        String getState();
        String getEndpointUri();
        long getExchangesTotal();
        long getExchangesCompleted();
        long getExchangesFailed();
        long getFailuresHandled();
        int getExchangesInflight();
        long getTotalProcessingTime();
        long getMaxProcessingTime();
        long getMinProcessingTime();
        long getMeanProcessingTime();
        long getLastExchangeCompletedTimestamp();
        long getLastExchangeFailureTimestamp();
        void start();
        void stop();
        void stop(long timeout);
        void suspend();
        void resume();
        void reset();
        void reset(boolean includeProcessors);
    }

    public interface ManagedProcessorMBean {
        String getCamelId();
        String getRouteId();
        String getProcessorId();
        String getProcessorName();
        int getIndex();
        int getLevel();
        String getParentId();
        String getDestination();
        long getExchangesTotal();
        long getExchangesCompleted();
        long getExchangesFailed();
        int getExchangesInflight();
        long getTotalProcessingTime();
        long getMaxProcessingTime();
        long getMinProcessingTime();
        long getMeanProcessingTime();
        void reset();
    }

    public static class Step implements ManagedProcessorMBean {
        final String route, id, name, parent, destination;
        final int index, level;
        final Stats stats = new Stats();

        Step(String route, String id, String name, int index, int level, String parent,
                String destination) {
            this.route = route;
            this.id = id;
            this.name = name;
            this.index = index;
            this.level = level;
            this.parent = parent;
            this.destination = destination;
        }

        public String getCamelId() { return CONTEXT; }
        public String getRouteId() { return route; }
        public String getProcessorId() { return id; }
        public String getProcessorName() { return name; }
        public int getIndex() { return index; }
        public int getLevel() { return level; }
        public String getParentId() { return parent; }
        public String getDestination() { return destination; }
        public long getExchangesTotal() { return stats.total.get(); }
        public long getExchangesCompleted() { return stats.completed.get(); }
        public long getExchangesFailed() { return stats.failed.get(); }
        public int getExchangesInflight() { return (int) stats.inflight.get(); }
        public long getTotalProcessingTime() { return stats.totalTime.get(); }
        public long getMaxProcessingTime() { return stats.maxTime.get(); }
        public long getMinProcessingTime() {
            long m = stats.minTime.get();
            return m == Long.MAX_VALUE ? 0 : m;
        }
        public long getMeanProcessingTime() { return stats.mean(); }
        public void reset() { stats.reset(); }
    }

    public static class Route implements ManagedRouteMBean {
        final String id, uri, group;
        final List<Step> steps = new ArrayList<>();
        final Stats stats = new Stats();
        volatile String state = "Started";

        Route(String id, String uri, String group) {
            this.id = id;
            this.uri = uri;
            this.group = group;
        }

        Step step(String id) {
            for (Step s : steps) {
                if (s.id.equals(id)) {
                    return s;
                }
            }
            throw new IllegalArgumentException(id);
        }

        public String getCamelId() { return CONTEXT; }
        public String getRouteId() { return id; }
        public String getRouteGroup() { return group; }
        public String getState() { return state; }
        public String getEndpointUri() { return uri; }
        public long getExchangesTotal() { return stats.total.get(); }
        public long getExchangesCompleted() { return stats.completed.get(); }
        public long getExchangesFailed() { return stats.failed.get(); }
        public long getFailuresHandled() { return 0; }
        public int getExchangesInflight() { return (int) stats.inflight.get(); }
        public long getTotalProcessingTime() { return stats.totalTime.get(); }
        public long getMaxProcessingTime() { return stats.maxTime.get(); }
        public long getMinProcessingTime() {
            long m = stats.minTime.get();
            return m == Long.MAX_VALUE ? 0 : m;
        }
        public long getMeanProcessingTime() { return stats.mean(); }
        public long getLastExchangeCompletedTimestamp() { return stats.lastCompleted; }
        public long getLastExchangeFailureTimestamp() { return stats.lastFailure; }
        public void start() { state = "Started"; }
        public void stop() { state = "Stopped"; }
        public void stop(long timeout) { state = "Stopped"; }
        public void suspend() { state = "Suspended"; }
        public void resume() { state = "Started"; }
        public void reset() {
            stats.reset();
        }
        public void reset(boolean includeProcessors) {
            stats.reset();
            if (includeProcessors) {
                for (Step s : steps) {
                    s.reset();
                }
            }
        }
    }

    static final String CONTEXT = "shop";

    public static void main(String[] args) throws Exception {
        int port = Integer.parseInt(args[0]);
        int pool = args.length > 1 ? Integer.parseInt(args[1]) : 4;
        long legacyMs = args.length > 2 ? Long.parseLong(args[2]) : 20;
        long marshalMs = args.length > 3 ? Long.parseLong(args[3]) : 1;

        Route orders = new Route("orders", "platform-http:///orders", "shop-api");
        orders.steps.add(new Step("orders", "log1", "log", 0, 1, null, null));
        orders.steps.add(new Step("orders", "choice1", "choice", 1, 1, null, null));
        orders.steps.add(new Step("orders", "when1", "when", 2, 2, "choice1", null));
        orders.steps.add(new Step("orders", "to1", "to", 3, 3, "when1", "http://legacy/stock"));
        orders.steps.add(new Step("orders", "otherwise1", "otherwise", 4, 2, "choice1", null));
        orders.steps.add(new Step("orders", "to2", "to", 5, 3, "otherwise1", "caffeine-cache://stock"));
        orders.steps.add(new Step("orders", "split1", "split", 6, 1, null, null));
        orders.steps.add(new Step("orders", "marshal1", "marshal", 7, 2, "split1", null));
        Route audit = new Route("audit", "platform-http:///audit", "ops");
        audit.steps.add(new Step("audit", "log2", "log", 0, 1, null, null));

        MBeanServer mbs = ManagementFactory.getPlatformMBeanServer();
        for (Route r : List.of(orders, audit)) {
            mbs.registerMBean(new StandardMBean(r, ManagedRouteMBean.class), new ObjectName(
                "org.apache.camel:context=" + CONTEXT + ",type=routes,name=\"" + r.id + "\""));
            for (Step s : r.steps) {
                mbs.registerMBean(new StandardMBean(s, ManagedProcessorMBean.class), new ObjectName(
                    "org.apache.camel:context=" + CONTEXT + ",type=processors,name=\"" + s.id + "\""));
            }
        }

        // The JDK's server writes a response's headers and body apart: without TCP_NODELAY
        // Nagle's algorithm holds the body until the client's delayed ACK (~40 ms), a
        // latency no Camel route has.
        System.setProperty("sun.net.httpserver.nodelay", "true");
        Semaphore legacyPool = new Semaphore(pool, true);
        HttpServer server = HttpServer.create(new InetSocketAddress("127.0.0.1", port), 512);
        server.setExecutor(Executors.newFixedThreadPool(64));
        server.createContext("/orders", ex -> {
            String query = ex.getRequestURI().getRawQuery();
            boolean store = query != null && query.contains("channel=store");
            serve(ex, orders, () -> {
                runStep(orders.step("log1"), () -> {});
                runStep(orders.step("choice1"), () -> {
                    if (!store) {
                        runStep(orders.step("when1"), () ->
                            runStep(orders.step("to1"), () -> {
                                legacyPool.acquireUninterruptibly();
                                try {
                                    Thread.sleep(legacyMs);
                                } finally {
                                    legacyPool.release();
                                }
                            }));
                    } else {
                        runStep(orders.step("otherwise1"), () ->
                            runStep(orders.step("to2"), () -> {}));
                    }
                });
                runStep(orders.step("split1"), () -> {
                    for (int line = 0; line < 3; line++) {
                        runStep(orders.step("marshal1"), () -> spin(marshalMs));
                    }
                });
            });
        });
        server.createContext("/audit", ex -> serve(ex, audit, () ->
            runStep(audit.step("log2"), () -> {})));

        Configuration config = new Configuration(ConfigKey.AGENT_ID, "camel-lab");
        LogHandler log = new LogHandler() {
            public void debug(String m) {}
            public void info(String m) {}
            public void error(String m, Throwable t) { System.err.println(m + ": " + t); }
        };
        BackendManager backend = new BackendManager(config, log, new AllowAllRestrictor());
        HttpRequestHandler jolokia = new HttpRequestHandler(config, backend, log);
        server.createContext("/jolokia", ex -> {
            JSONAware answer;
            try {
                Map<String, String[]> params = params(ex.getRequestURI().getRawQuery());
                if ("POST".equals(ex.getRequestMethod())) {
                    answer = jolokia.handlePostRequest(
                        ex.getRequestURI().toString(), ex.getRequestBody(), "utf-8", params);
                } else {
                    String path = ex.getRequestURI().getPath().substring("/jolokia".length());
                    answer = jolokia.handleGetRequest(ex.getRequestURI().toString(), path, params);
                }
            } catch (Throwable t) {
                answer = jolokia.handleThrowable(t);
            }
            byte[] body = answer.toJSONString().getBytes(StandardCharsets.UTF_8);
            ex.getResponseHeaders().set("Content-Type", "application/json");
            ex.sendResponseHeaders(200, body.length);
            try (OutputStream out = ex.getResponseBody()) {
                out.write(body);
            }
        });
        server.start();
        System.out.println("listening " + port);
        System.out.flush();
    }

    interface Body {
        void run() throws Exception;
    }

    /** One exchange of `route`: 503 unless Started, else its steps, timed. */
    static void serve(HttpExchange ex, Route route, Body body) throws IOException {
        if (!"Started".equals(route.state)) {
            answer(ex, 503, "route " + route.id + " is " + route.state + "\n");
            return;
        }
        long t0 = System.nanoTime();
        route.stats.begin();
        boolean ok = true;
        try {
            body.run();
        } catch (Exception e) {
            ok = false;
        }
        route.stats.end((System.nanoTime() - t0) / 1_000_000, ok);
        answer(ex, ok ? 200 : 500, ok ? "ok\n" : "failed\n");
    }

    static void runStep(Step step, Body body) throws Exception {
        long t0 = System.nanoTime();
        step.stats.begin();
        boolean ok = false;
        try {
            body.run();
            ok = true;
        } finally {
            step.stats.end((System.nanoTime() - t0) / 1_000_000, ok);
        }
    }

    static void spin(long ms) {
        long until = System.nanoTime() + ms * 1_000_000;
        long x = 0;
        while (System.nanoTime() < until) {
            x += 1;
        }
        if (x == 42) {
            System.out.print("");
        }
    }

    static void answer(HttpExchange ex, int status, String text) throws IOException {
        byte[] body = text.getBytes(StandardCharsets.UTF_8);
        ex.sendResponseHeaders(status, body.length);
        try (OutputStream out = ex.getResponseBody()) {
            out.write(body);
        }
    }

    static Map<String, String[]> params(String query) {
        Map<String, String[]> out = new HashMap<>();
        if (query == null) {
            return out;
        }
        for (String kv : query.split("&")) {
            int i = kv.indexOf('=');
            String k = URLDecoder.decode(i < 0 ? kv : kv.substring(0, i), StandardCharsets.UTF_8);
            String v = i < 0 ? "" : URLDecoder.decode(kv.substring(i + 1), StandardCharsets.UTF_8);
            out.put(k, new String[] {v});
        }
        return out;
    }
}
