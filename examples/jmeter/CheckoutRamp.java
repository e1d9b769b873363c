// Builds and runs the "checkout ramp" JMeter test plan in code, with the JMeter API only.
//
// Why code and not a .jmx: Debian 12's JMeter 2.13 package cannot load any .jmx
// (XStream ForbiddenClassException: org.apache.jmeter.save.ScriptWrapper), but its
// API works. See README.md for versions and the exact command; generate.sh runs it.
//
// Usage: JMETER_HOME=/usr/share/jmeter java -cp "$CP" CheckoutRamp OUT.jtl [prop=value ...]
//   prop=value pairs are set as JMeter properties before anything reads them
//   (e.g. log_file=/tmp/jmeter.log, jmeter.save.saveservice.url=true).
// Environment: SHOP_PORT (default 8098), STEP_SECONDS (default 40: length of a ramp step).
//
// Plan: six thread groups "Shoppers 1".."Shoppers 6" start STEP_SECONDS apart with
// 2, 2, 4, 4, 6, 6 users (2 → 4 → 8 → 12 → 18 → 24 active users) and all stop at
// 7 × STEP_SECONDS (280 s by default). Each user loops:
//   Once only:  Login (POST)
//   Home, "Search, filtered" (+ Response Assertion), Product page,
//   Transaction Controller "Checkout flow" (classic mode, not parent; timers excluded):
//       Add to cart, Checkout (POST)
//   Throughput Controller 20 % of iterations: Report
// with a 200 ms Constant Timer before every sampler (think time).

import java.io.File;

import org.apache.jmeter.assertions.ResponseAssertion;
import org.apache.jmeter.config.Arguments;
import org.apache.jmeter.control.LoopController;
import org.apache.jmeter.control.OnceOnlyController;
import org.apache.jmeter.control.ThroughputController;
import org.apache.jmeter.control.TransactionController;
import org.apache.jmeter.engine.StandardJMeterEngine;
import org.apache.jmeter.protocol.http.sampler.HTTPSamplerProxy;
import org.apache.jmeter.reporters.ResultCollector;
import org.apache.jmeter.reporters.Summariser;
import org.apache.jmeter.samplers.SampleSaveConfiguration;
import org.apache.jmeter.save.CSVSaveService;
import org.apache.jmeter.testelement.TestElement;
import org.apache.jmeter.testelement.TestPlan;
import org.apache.jmeter.threads.ThreadGroup;
import org.apache.jmeter.timers.ConstantTimer;
import org.apache.jmeter.util.JMeterUtils;
import org.apache.jorphan.collections.HashTree;
import org.apache.jorphan.collections.ListedHashTree;

public class CheckoutRamp {
    static final String HOST = "127.0.0.1";
    static int port;

    public static void main(String[] args) throws Exception {
        if (args.length < 1) {
            System.err.println("usage: CheckoutRamp OUT.jtl [prop=value ...]");
            System.exit(2);
        }
        String home = System.getenv("JMETER_HOME");
        if (home == null || home.isEmpty()) home = "/usr/share/jmeter";
        port = Integer.parseInt(env("SHOP_PORT", "8098"));
        int step = Integer.parseInt(env("STEP_SECONDS", "40"));
        File out = new File(args[0]).getAbsoluteFile();
        if (out.exists() && !out.delete()) throw new IllegalStateException("cannot replace " + out);

        // 1. Properties. jmeter.properties sets sampleresult.timestamp.start=true (timeStamp =
        //    sample start). The saveservice switches must be set before SampleSaveConfiguration
        //    is loaded: it reads them into static defaults once.
        System.setProperty("JMeter.NonGui", "true"); // summariser prints to stdout
        JMeterUtils.setJMeterHome(home);
        JMeterUtils.loadJMeterProperties(home + "/bin/jmeter.properties");
        String[][] save = {
            {"jmeter.save.saveservice.output_format", "csv"},
            {"jmeter.save.saveservice.print_field_names", "true"},
            {"jmeter.save.saveservice.assertion_results_failure_message", "true"},
            {"jmeter.save.saveservice.url", "true"},
            {"jmeter.save.saveservice.idle_time", "true"},
            {"jmeter.save.saveservice.connect_time", "true"},
            {"summariser.interval", "30"},
        };
        for (String[] kv : save) JMeterUtils.setProperty(kv[0], kv[1]);
        for (int i = 1; i < args.length; i++) {
            int eq = args[i].indexOf('=');
            if (eq <= 0) throw new IllegalArgumentException("expected prop=value: " + args[i]);
            JMeterUtils.setProperty(args[i].substring(0, eq), args[i].substring(eq + 1));
        }
        JMeterUtils.initLogging();
        JMeterUtils.initLocale();

        // 2. Plan.
        TestPlan plan = new TestPlan("Checkout ramp");
        plan.setFunctionalMode(false);
        plan.setSerialized(false);
        plan.setUserDefinedVariables(new Arguments());
        // ListedHashTree keeps insertion order (a plain HashTree is a HashMap: thread groups and
        // samplers would run in hash order, e.g. Home before the once-only Login).
        HashTree root = new ListedHashTree();
        HashTree planTree = root.add(plan);

        SampleSaveConfiguration cfg = new SampleSaveConfiguration(); // from the properties above
        System.out.println("JTL columns: " + CSVSaveService.printableFieldNamesToString(cfg));
        ResultCollector jtl = new ResultCollector(new Summariser("summary"));
        jtl.setName("JTL writer");
        jtl.setSaveConfig(cfg);
        jtl.setFilename(out.getPath());
        planTree.add(jtl);

        int[] users = {2, 2, 4, 4, 6, 6};
        long end = (users.length + 1L) * step;
        for (int g = 0; g < users.length; g++) {
            long delay = (long) g * step;
            addShoppers(planTree, "Shoppers " + (g + 1), users[g], delay, end - delay);
        }

        // 3. Run (blocks until every thread group has finished; listeners close the file).
        System.out.println("Running " + end + " s against http://" + HOST + ":" + port + "/ -> " + out);
        StandardJMeterEngine engine = new StandardJMeterEngine();
        engine.configure(root);
        engine.run();
        System.out.println("Done: " + out);
        System.exit(0); // JMeter leaves non-daemon helper threads behind
    }

    static String env(String k, String dflt) {
        String v = System.getenv(k);
        return v == null || v.isEmpty() ? dflt : v;
    }

    static void addShoppers(HashTree planTree, String name, int n, long delayS, long durationS) {
        LoopController loop = new LoopController();
        loop.setName(name + " loop");
        loop.setLoops(LoopController.INFINITE_LOOP_COUNT); // until the scheduler's end time
        loop.setContinueForever(false);
        loop.setFirst(true);
        loop.initialize();

        ThreadGroup tg = new ThreadGroup();
        tg.setName(name);
        tg.setNumThreads(n);
        tg.setRampUp(4); // the step's users arrive over 4 s
        tg.setSamplerController(loop);
        tg.setScheduler(true);
        tg.setDelay(delayS);
        tg.setDuration(durationS);
        tg.setProperty(ThreadGroup.ON_SAMPLE_ERROR, ThreadGroup.ON_SAMPLE_ERROR_CONTINUE);
        HashTree t = planTree.add(tg);

        ConstantTimer think = new ConstantTimer();
        think.setName("Think time");
        think.setDelay("200");
        t.add(think);

        OnceOnlyController once = new OnceOnlyController();
        once.setName("Once per user");
        HashTree onceTree = t.add(once);
        HTTPSamplerProxy login = http("Login (POST)", "POST", "/login");
        login.addArgument("user", "shopper${__threadNum}");
        login.addArgument("password", "s3cret");
        onceTree.add(login);

        t.add(http("Home", "GET", "/"));

        HTTPSamplerProxy search = http("Search, filtered", "GET", "/search");
        search.addArgument("q", "item${__Random(1,60,)}");
        search.addArgument("filter", "in_stock");
        ResponseAssertion ok = new ResponseAssertion();
        ok.setName("Search answered ok");
        ok.setTestFieldResponseData();
        ok.setToSubstringType();
        ok.addTestString("\"status\": \"ok\", \"results\"");
        HashTree searchTree = t.add(search);
        searchTree.add(ok);

        t.add(http("Product page", "GET", "/product/${__Random(1,400,)}"));

        TransactionController tx = new TransactionController();
        tx.setName("Checkout flow");
        tx.setParent(false);        // classic mode: children rows + one TX row after them
        tx.setIncludeTimers(false); // TX elapsed = children's time, think time excluded
        HashTree txTree = t.add(tx);
        HTTPSamplerProxy cart = http("Add to cart", "POST", "/cart");
        cart.addArgument("sku", "SKU-${__Random(1,400,)}");
        cart.addArgument("qty", "1");
        txTree.add(cart);
        HTTPSamplerProxy checkout = http("Checkout (POST)", "POST", "/checkout");
        checkout.addArgument("payment", "card");
        txTree.add(checkout);

        ThroughputController some = new ThroughputController();
        some.setName("20 % of iterations");
        some.setStyle(ThroughputController.BYPERCENT);
        some.setPercentThroughput(20.0f);
        some.setPerThread(false);
        HashTree someTree = t.add(some);
        someTree.add(http("Report", "GET", "/report"));
    }

    static HTTPSamplerProxy http(String label, String method, String path) {
        HTTPSamplerProxy s = new HTTPSamplerProxy();
        s.setName(label);
        s.setProperty(TestElement.TEST_CLASS, HTTPSamplerProxy.class.getName());
        s.setProtocol("http");
        s.setDomain(HOST);
        s.setPort(port);
        s.setMethod(method);
        s.setPath(path);
        s.setUseKeepAlive(true);
        s.setFollowRedirects(false);
        s.setAutoRedirects(false);
        s.setConnectTimeout("2000");
        s.setResponseTimeout("10000");
        return s;
    }
}
