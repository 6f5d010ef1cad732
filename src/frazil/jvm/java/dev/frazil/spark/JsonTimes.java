package dev.frazil.spark;

import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import com.fasterxml.jackson.core.exc.InputCoercionException;
import dev.frazil.spark.JsonConverters.Conv;
import dev.frazil.spark.JsonConverters.Plan;
import dev.frazil.spark.JsonDecoder.Context;
import java.io.IOException;
import java.time.LocalDate;
import org.apache.spark.sql.catalyst.util.DateTimeUtils;
import org.apache.spark.sql.catalyst.util.RebaseDateTime;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.unsafe.types.UTF8String;
import scala.Option;

/**
 * The timestamp and date converters of {@link JsonDecoder}, and {@link Iso}: ISO-8601 text in
 * its common forms parsed by arithmetic, without regex or a zone lookup per value; any other
 * form goes to Spark's own parser, so the accepted forms stay {@code from_json}'s.
 */
final class JsonTimes {
  private JsonTimes() {}

  static final class TimestampConv extends Conv {
    final Plan plan;

    TimestampConv(DataType type, Plan plan) {
      super(type);
      this.plan = plan;
    }

    @Override
    boolean parsesText() {
      return true;
    }

    @Override
    Object read(JsonParser p, JsonToken t, Context c) throws IOException {
      long micros;
      if (t == JsonToken.VALUE_STRING && p.getTextLength() >= 1) {
        micros = plan.formatter != null ? formatted(p.getText(), p, t) : iso(p, t);
      } else if (t == JsonToken.VALUE_NUMBER_INT) {
        try {
          micros = Math.multiplyExact(p.getLongValue(), 1_000_000L); // epoch seconds
        } catch (InputCoercionException | ArithmeticException e) {
          throw mismatch(p, t);
        }
      } else {
        throw mismatch(p, t);
      }
      return micros;
    }

    private long formatted(String text, JsonParser p, JsonToken t) {
      try {
        return plan.formatter.parse(text);
      } catch (Exception e) { // Spark's formatter throws ParseException or DateTimeException
        throw mismatch(p, t);
      }
    }

    private long iso(JsonParser p, JsonToken t) throws IOException {
      long fast = Iso.timestamp(p.getTextCharacters(), p.getTextOffset(), p.getTextLength(), plan);
      if (fast != Iso.NONE) {
        return fast;
      }
      String text = p.getText();
      Option<Object> parsed = DateTimeUtils.stringToTimestamp(UTF8String.fromString(text), plan.zone);
      if (parsed.isEmpty()) {
        parsed =
            DateTimeUtils.stringToTimestamp(
                DateTimeUtils.cleanLegacyTimestampStr(UTF8String.fromString(text)), plan.zone);
      }
      if (parsed.isEmpty()) {
        throw mismatch(p, t);
      }
      return (Long) parsed.get();
    }
  }

  static final class TimestampNtzConv extends Conv {
    TimestampNtzConv(DataType type) {
      super(type);
    }

    @Override
    boolean parsesText() {
      return true;
    }

    @Override
    Object read(JsonParser p, JsonToken t, Context c) throws IOException {
      if (t != JsonToken.VALUE_STRING || p.getTextLength() < 1) {
        throw mismatch(p, t);
      }
      Option<Object> parsed =
          DateTimeUtils.stringToTimestampWithoutTimeZone(UTF8String.fromString(p.getText()), false);
      if (parsed.isEmpty()) {
        throw mismatch(p, t);
      }
      return parsed.get();
    }
  }

  static final class DateConv extends Conv {
    DateConv(DataType type) {
      super(type);
    }

    @Override
    boolean parsesText() {
      return true;
    }

    @Override
    Object read(JsonParser p, JsonToken t, Context c) throws IOException {
      if (t != JsonToken.VALUE_STRING || p.getTextLength() < 1) {
        throw mismatch(p, t);
      }
      long fast = Iso.date(p.getTextCharacters(), p.getTextOffset(), p.getTextLength());
      if (fast != Iso.NONE) {
        return (int) fast;
      }
      String text = p.getText();
      Option<Object> parsed = DateTimeUtils.stringToDate(UTF8String.fromString(text));
      if (parsed.isEmpty()) {
        parsed =
            DateTimeUtils.stringToDate(
                DateTimeUtils.cleanLegacyTimestampStr(UTF8String.fromString(text)));
      }
      if (!parsed.isEmpty()) {
        return parsed.get();
      }
      try {
        // Spark 1.5 wrote days since the epoch as text; from_json still reads them.
        return RebaseDateTime.rebaseJulianToGregorianDays(Integer.parseInt(text));
      } catch (NumberFormatException e) {
        throw mismatch(p, t);
      }
    }
  }

  /**
   * ISO-8601 dates and timestamps in their common forms, by arithmetic; NONE otherwise. The
   * text is read where the parser holds it ({@code chars[off, off + n)}): a value that takes
   * the fast path builds no {@code String} (one per timestamp was ~3% of a steady run's
   * allocated bytes on the payments).
   */
  static final class Iso {
    static final long NONE = Long.MIN_VALUE;

    private Iso() {}

    private static int digits(char[] s, int from, int count) {
      int value = 0;
      for (int i = from; i < from + count; i++) {
        char ch = s[i];
        if (ch < '0' || ch > '9') {
          return -1;
        }
        value = value * 10 + (ch - '0');
      }
      return value;
    }

    /** Days since the epoch of {@code yyyy-MM-dd} at {@code s[o]}; NONE if not. */
    static long dayAt(char[] s, int o, int n) {
      if (n < 10 || s[o + 4] != '-' || s[o + 7] != '-') {
        return NONE;
      }
      int year = digits(s, o, 4);
      int month = digits(s, o + 5, 2);
      int day = digits(s, o + 8, 2);
      if (year < 0 || month < 1 || month > 12 || day < 1) {
        return NONE;
      }
      if (day > 28 && day > LocalDate.of(year, month, 1).lengthOfMonth()) {
        return NONE;
      }
      return epochDay(year, month, day);
    }

    /** java.time's epoch-day arithmetic, without a LocalDate. */
    private static long epochDay(long y, int m, int d) {
      long total = 365 * y;
      if (y >= 0) {
        total += (y + 3) / 4 - (y + 99) / 100 + (y + 399) / 400;
      } else {
        total -= y / -4 - y / -100 + y / -400;
      }
      total += (367 * m - 362) / 12;
      total += d - 1;
      if (m > 2) {
        total--;
        boolean leap = (y & 3) == 0 && (y % 100 != 0 || y % 400 == 0);
        if (!leap) {
          total--;
        }
      }
      return total - 719528L;
    }

    static long date(char[] s, int o, int n) {
      return n == 10 ? dayAt(s, o, n) : NONE;
    }

    /** Microseconds since the epoch, or NONE for a form left to Spark's parser. */
    static long timestamp(char[] s, int o, int n, Plan plan) {
      if (n < 16) {
        return NONE;
      }
      long day = dayAt(s, o, n);
      char sep = s[o + 10];
      if (day == NONE || (sep != 'T' && sep != ' ') || s[o + 13] != ':') {
        return NONE;
      }
      int hour = digits(s, o + 11, 2);
      int minute = digits(s, o + 14, 2);
      if (hour < 0 || hour > 23 || minute < 0 || minute > 59) {
        return NONE;
      }
      int i = 16;
      int second = 0;
      int micros = 0;
      if (i < n && s[o + i] == ':') {
        if (n < i + 3) {
          return NONE;
        }
        second = digits(s, o + i + 1, 2);
        if (second < 0 || second > 59) {
          return NONE;
        }
        i += 3;
        if (i < n && s[o + i] == '.') {
          int start = ++i;
          while (i < n && s[o + i] >= '0' && s[o + i] <= '9') {
            i++;
          }
          int count = i - start;
          if (count < 1 || count > 6) {
            return NONE;
          }
          micros = digits(s, o + start, count);
          for (int k = count; k < 6; k++) {
            micros *= 10;
          }
        }
      }
      long secondOfDay = hour * 3600L + minute * 60L + second;
      if (i == n) {
        return plan.localMicros(day, secondOfDay, micros);
      }
      int offset;
      char z = s[o + i];
      if (z == 'Z' && i + 1 == n) {
        offset = 0;
      } else if (z == '+' || z == '-') {
        int oh;
        int om;
        if (n == i + 6 && s[o + i + 3] == ':') {
          oh = digits(s, o + i + 1, 2);
          om = digits(s, o + i + 4, 2);
        } else if (n == i + 5) {
          oh = digits(s, o + i + 1, 2);
          om = digits(s, o + i + 3, 2);
        } else {
          return NONE;
        }
        if (oh < 0 || om < 0 || oh > 18 || om > 59 || (oh == 18 && om > 0)) {
          return NONE;
        }
        offset = (oh * 3600 + om * 60) * (z == '-' ? -1 : 1);
      } else {
        return NONE;
      }
      return ((day * 86400L + secondOfDay) - offset) * 1_000_000L + micros;
    }
  }
}
