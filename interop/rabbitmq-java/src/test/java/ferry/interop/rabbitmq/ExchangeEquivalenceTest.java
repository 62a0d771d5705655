package ferry.interop.rabbitmq;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.util.HashMap;
import java.util.Map;
import java.util.stream.Stream;

import com.rabbitmq.client.Channel;
import com.rabbitmq.client.Connection;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * exchange.declare of an existing exchange must match it (issue 16). RabbitMQ compares type,
 * durable, auto-delete, internal and the alternate-exchange argument (no other argument) and
 * refuses a mismatch with 406 PRECONDITION_FAILED, closing only the channel.
 */
class ExchangeEquivalenceTest extends RabbitSupport {

    /** One exchange.declare's properties; {@code ae} is 0 (none), 1 or 2 (two alternate exchanges). */
    record Decl(boolean durable, boolean autoDelete, boolean internal, int ae) {
        static final Decl PLAIN = new Decl(false, false, false, 0);

        void declare(Channel ch, String name, String[] alternates) throws IOException {
            Map<String, Object> args = new HashMap<>();
            if (ae > 0) {
                args.put("alternate-exchange", alternates[ae - 1]);
            }
            ch.exchangeDeclare(name, "direct", durable, autoDelete, internal, args);
        }
    }

    static Stream<Arguments> mismatches() {
        return Stream.of(
                Arguments.of("durable", Decl.PLAIN, new Decl(true, false, false, 0)),
                Arguments.of("not durable", new Decl(true, false, false, 0), Decl.PLAIN),
                Arguments.of("auto-delete", Decl.PLAIN, new Decl(false, true, false, 0)),
                Arguments.of("internal", Decl.PLAIN, new Decl(false, false, true, 0)),
                Arguments.of("alternate-exchange added", Decl.PLAIN, new Decl(false, false, false, 1)),
                Arguments.of("alternate-exchange changed", new Decl(false, false, false, 1),
                        new Decl(false, false, false, 2)),
                Arguments.of("alternate-exchange dropped", new Decl(false, false, false, 1), Decl.PLAIN));
    }

    /** Two alternate exchanges that exist (a missing one is another question). */
    String[] alternates(Channel ch) throws IOException {
        return new String[] {exchange(ch, "ae1", "fanout"), exchange(ch, "ae2", "fanout")};
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("mismatches")
    void redeclareWithOtherPropertiesIs406(String what, Decl first, Decl second) throws Exception {
        Connection c = connect();
        Channel ch = c.createChannel();
        String[] alternates = alternates(ch);
        String x = exchangeName("equiv");
        first.declare(ch, x, alternates);
        IOException e = assertThrows(IOException.class, () -> second.declare(ch, x, alternates),
                "exchange redeclared with " + what);
        assertEquals(406, channelCloseCode(e), "exchange redeclared with " + what + ": PRECONDITION_FAILED");
        assertConnectionUsable(c);
        // The exchange is as first declared: that declaration still succeeds.
        first.declare(c.createChannel(), x, alternates);
    }

    @Test
    void equivalentRedeclareSucceeds() throws Exception {
        Channel ch = connect().createChannel();
        String[] alternates = alternates(ch);
        String x = exchangeName("equiv-same");
        // Arguments other than alternate-exchange are not compared.
        Map<String, Object> args = new HashMap<>(Map.of("alternate-exchange", alternates[0], "x-note", "a"));
        ch.exchangeDeclare(x, "topic", true, true, true, args);
        args.put("x-note", "b");
        ch.exchangeDeclare(x, "topic", true, true, true, args);
        ch.exchangeDeclarePassive(x);
        assertTrue(ch.isOpen());
    }
}
