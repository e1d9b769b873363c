// A stepped JMeter ramp against the lab, built and run with the JMeter API (Debian's
// JMeter 2.13 cannot load a .jmx: its XStream refuses JMeter's classes).
//
// Usage: JMETER_HOME=/usr/share/jmeter java -cp "$CP" LabRamp URL OUT.jtl STEPS USERS_PER_STEP STEP_S THINK_MS TIMEOUT_MS [prop=value ...]
//
// Thread group g (0 ≤ g < STEPS) starts USERS_PER_STEP users at g × STEP_S (arriving over
// one second) and all stop at STEPS × STEP_S, so the active users climb in steps of
// USERS_PER_STEP. Each user loops: GET URL (keep-alive, connect and response timeouts
// TIMEOUT_MS), then THINK_MS of think time (a Constant Timer) when it is above 0.
// Results: CSV JTL with a header line (print_field_names=true), thread counts included.

import java.io.File;
import java.net.URL;

import org.apache.jmeter.config.Arguments;
import org.apache.jmeter.control.LoopController;
import org.apache.jmeter.engine.StandardJMeterEngine;
import org.apache.jmeter.protocol.http.sampler.HTTPSamplerProxy;
import org.apache.jmeter.reporters.ResultCollector;
import org.apache.jmeter.samplers.SampleSaveConfiguration;
import org.apache.jmeter.testelement.TestElement;
import org.apache.jmeter.testelement.TestPlan;
import org.apache.jmeter.threads.ThreadGroup;
import org.apache.jmeter.timers.ConstantTimer;
import org.apache.jmeter.util.JMeterUtils;
import org.apache.jorphan.collections.HashTree;
import org.apache.jorphan.collections.ListedHashTree;

public class LabRamp {
    public static void main(String[] args) throws Exception {
        if (args.length < 7) {
            System.err.println("usage: LabRamp URL OUT.jtl STEPS USERS_PER_STEP STEP_S THINK_MS TIMEOUT_MS [prop=value ...]");
            System.exit(2);
        }
        URL url = new URL(args[0]);
        File out = new File(args[1]).getAbsoluteFile();
        int steps = Integer.parseInt(args[2]);
        int perStep = Integer.parseInt(args[3]);
        int stepS = Integer.parseInt(args[4]);
        int thinkMs = Integer.parseInt(args[5]);
        String timeoutMs = args[6];
        String home = System.getenv("JMETER_HOME");
        if (home == null || home.isEmpty()) home = "/usr/share/jmeter";

        System.setProperty("JMeter.NonGui", "true");
        JMeterUtils.setJMeterHome(home);
        JMeterUtils.loadJMeterProperties(home + "/bin/jmeter.properties");
        JMeterUtils.setProperty("jmeter.save.saveservice.output_format", "csv");
        JMeterUtils.setProperty("jmeter.save.saveservice.print_field_names", "true");
        JMeterUtils.setProperty("jmeter.save.saveservice.thread_counts", "true");
        for (int i = 7; i < args.length; i++) {
            int eq = args[i].indexOf('=');
            if (eq <= 0) throw new IllegalArgumentException("expected prop=value: " + args[i]);
            JMeterUtils.setProperty(args[i].substring(0, eq), args[i].substring(eq + 1));
        }
        JMeterUtils.initLogging();
        JMeterUtils.initLocale();

        TestPlan plan = new TestPlan("Lab ramp");
        plan.setFunctionalMode(false);
        plan.setSerialized(false);
        plan.setUserDefinedVariables(new Arguments());
        HashTree root = new ListedHashTree();
        HashTree planTree = root.add(plan);

        ResultCollector jtl = new ResultCollector();
        jtl.setName("JTL writer");
        jtl.setSaveConfig(new SampleSaveConfiguration());
        jtl.setFilename(out.getPath());
        planTree.add(jtl);

        long end = (long) steps * stepS;
        for (int g = 0; g < steps; g++) {
            long delay = (long) g * stepS;
            LoopController loop = new LoopController();
            loop.setLoops(LoopController.INFINITE_LOOP_COUNT);
            loop.setContinueForever(false);
            loop.setFirst(true);
            loop.initialize();

            ThreadGroup tg = new ThreadGroup();
            tg.setName("Step " + (g + 1));
            tg.setNumThreads(perStep);
            tg.setRampUp(1);
            tg.setSamplerController(loop);
            tg.setScheduler(true);
            tg.setDelay(delay);
            tg.setDuration(end - delay);
            tg.setProperty(ThreadGroup.ON_SAMPLE_ERROR, ThreadGroup.ON_SAMPLE_ERROR_CONTINUE);
            HashTree t = planTree.add(tg);
            if (thinkMs > 0) {
                ConstantTimer think = new ConstantTimer();
                think.setName("Think time");
                think.setDelay(Integer.toString(thinkMs));
                t.add(think);
            }
            HTTPSamplerProxy s = new HTTPSamplerProxy();
            s.setName("GET /work");
            s.setProperty(TestElement.TEST_CLASS, HTTPSamplerProxy.class.getName());
            s.setProtocol(url.getProtocol());
            s.setDomain(url.getHost());
            s.setPort(url.getPort());
            s.setMethod("GET");
            s.setPath(url.getPath());
            s.setUseKeepAlive(true);
            s.setFollowRedirects(false);
            s.setAutoRedirects(false);
            s.setConnectTimeout(timeoutMs);
            s.setResponseTimeout(timeoutMs);
            t.add(s);
        }

        StandardJMeterEngine engine = new StandardJMeterEngine();
        engine.configure(root);
        engine.run();
        System.exit(0); // JMeter leaves non-daemon helper threads behind
    }
}
