package ferry.interop.jms2;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;

import jakarta.jms.JMSContext;
import jakarta.jms.Message;
import jakarta.jms.Queue;
import jakarta.jms.QueueBrowser;

import org.junit.jupiter.api.Test;

/** Queue browsers: a source with distribution mode copy. */
class BrowserTest extends Support {

    @Test
    void browsingLeavesTheMessagesQueued() throws Exception {
        String name = declareQueue("browse");
        try (JMSContext ctx = context()) {
            Queue queue = ctx.createQueue(name);
            for (int i = 0; i < 3; i++) {
                ctx.createProducer().send(queue, "b" + i);
            }
            List<String> seen = new ArrayList<>();
            try (QueueBrowser browser = ctx.createBrowser(queue)) {
                for (Object m : Collections.list(browser.getEnumeration())) {
                    seen.add(((Message) m).getBody(String.class));
                }
            }
            assertEquals(List.of("b0", "b1", "b2"), seen);
            assertEquals(3, depth(name));
        }
    }
}
