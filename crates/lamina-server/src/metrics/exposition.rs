//! The Prometheus text exposition format (version 0.0.4): metric families
//! with their `HELP` and `TYPE` lines, samples, histograms, and numbers
//! spelled as the Prometheus clients spell them.

use std::fmt::Write as _;

/// The kind of a metric family (`# TYPE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Only goes up (resets on restart).
    Counter,
    /// Goes up and down.
    Gauge,
    /// Cumulative `_bucket{le=..}`, `_sum` and `_count`.
    Histogram,
    /// `{quantile=..}`, `_sum` and `_count`.
    Summary,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
            Kind::Histogram => "histogram",
            Kind::Summary => "summary",
        }
    }
}

/// One metric family being written: its `HELP` and `TYPE` lines first,
/// then its samples, all together as the format requires.
pub struct Family<'a> {
    out: &'a mut String,
    name: &'a str,
}

impl<'a> Family<'a> {
    /// Starts family `name` in `out`.
    pub fn new(out: &'a mut String, name: &'a str, kind: Kind, help: &str) -> Family<'a> {
        let help = help.replace('\\', "\\\\").replace('\n', "\\n");
        let _ = writeln!(out, "# HELP {name} {help}");
        let _ = writeln!(out, "# TYPE {name} {}", kind.name());
        Family { out, name }
    }

    /// A sample of the family itself: `labels` are `(name, value)` pairs
    /// (values escaped here).
    pub fn sample(&mut self, labels: &[(&str, &str)], value: f64) {
        self.sample_suffixed("", labels, value);
    }

    /// A sample named the family's name plus `suffix` (`_sum`, `_count`,
    /// `_bucket`).
    pub fn sample_suffixed(&mut self, suffix: &str, labels: &[(&str, &str)], value: f64) {
        self.out.push_str(self.name);
        self.out.push_str(suffix);
        if !labels.is_empty() {
            self.out.push('{');
            for (i, (k, v)) in labels.iter().enumerate() {
                if i > 0 {
                    self.out.push(',');
                }
                let v = v
                    .replace('\\', "\\\\")
                    .replace('"', "\\\"")
                    .replace('\n', "\\n");
                let _ = write!(self.out, "{k}=\"{v}\"");
            }
            self.out.push('}');
        }
        let _ = writeln!(self.out, " {}", number(value));
    }

    /// A histogram's samples: `cumulative[i]` events at or below
    /// `bounds[i]`, then `+Inf` (= `count`), `_sum` and `_count`.
    pub fn histogram(
        &mut self,
        labels: &[(&str, &str)],
        bounds: &[f64],
        cumulative: &[u64],
        count: u64,
        sum: f64,
    ) {
        let les: Vec<String> = bounds
            .iter()
            .map(|&b| number(b))
            .chain(std::iter::once("+Inf".to_string()))
            .collect();
        let counts = cumulative.iter().copied().chain(std::iter::once(count));
        for (le, n) in les.iter().zip(counts) {
            let mut with_le = labels.to_vec();
            with_le.push(("le", le));
            self.sample_suffixed("_bucket", &with_le, n as f64);
        }
        self.sample_suffixed("_sum", labels, sum);
        self.sample_suffixed("_count", labels, count as f64);
    }
}

/// A sample value as the Prometheus clients write it (Go's
/// `strconv.FormatFloat(v, 'g', -1, 64)`, which the Python client
/// imitates): the shortest digits that read back as `v`, in exponent form
/// below 1e-4 and from 1e6 on (`2.5e-06`, `1.5e+09`), `+Inf`, `-Inf`,
/// `NaN`. Values computed from integers in one division (ns / 1e9) print
/// without artefacts such as `0.30000000000000004`.
pub fn number(v: f64) -> String {
    if v.is_nan() {
        return "NaN".into();
    }
    if v.is_infinite() {
        return if v > 0.0 { "+Inf" } else { "-Inf" }.into();
    }
    if v == 0.0 {
        return "0".into();
    }
    // Rust's `{:e}` gives the shortest round-tripping digits: "1.5e9".
    let sci = format!("{v:e}");
    let Some((mantissa, exp)) = sci.split_once('e') else {
        return sci;
    };
    let exp: i32 = exp.parse().unwrap_or(0);
    if (-4..6).contains(&exp) {
        // Also shortest, in positional form.
        format!("{v}")
    } else {
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{mantissa}e{sign}{:02}", exp.unsigned_abs())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Go's `strconv.FormatFloat(v, 'g', -1, 64)` on the same values (as
    /// Prometheus' Go client writes them; Python's `floatToGoString` gives
    /// the same).
    #[test]
    fn numbers_are_spelled_as_go_spells_them() {
        for (v, want) in [
            (0.0, "0"),
            (1.0, "1"),
            (-1.0, "-1"),
            (121.0, "121"),
            (123_456.0, "123456"),
            (1e6, "1e+06"),
            (1_234_567.0, "1.234567e+06"),
            (1.7e9, "1.7e+09"),
            (0.3, "0.3"),
            (0.0001, "0.0001"),
            (0.00001, "1e-05"),
            (2.5e-6, "2.5e-06"),
            (1e-10, "1e-10"),
            (1e100, "1e+100"),
            (-0.5, "-0.5"),
            (f64::INFINITY, "+Inf"),
            (f64::NEG_INFINITY, "-Inf"),
            (f64::NAN, "NaN"),
        ] {
            assert_eq!(number(v), want, "{v}");
        }
        // Every spelling reads back as the value.
        for v in [0.1 + 0.2, 1.0 / 3.0, 123_456_789.123, 6.02e23, 5e-324] {
            assert_eq!(number(v).parse::<f64>().unwrap(), v);
        }
    }

    #[test]
    fn help_and_label_values_are_escaped() {
        let mut out = String::new();
        let mut f = Family::new(&mut out, "x_total", Kind::Counter, "a \\ b\nc");
        f.sample(&[("k", "q\"\\\n")], 3.0);
        assert_eq!(
            out,
            "# HELP x_total a \\\\ b\\nc\n# TYPE x_total counter\nx_total{k=\"q\\\"\\\\\\n\"} 3\n"
        );
    }

    #[test]
    fn a_histogram_ends_with_inf_sum_and_count() {
        let mut out = String::new();
        Family::new(&mut out, "h_seconds", Kind::Histogram, "h").histogram(
            &[("op", "get")],
            &[0.001, 0.5],
            &[1, 3],
            4,
            0.25,
        );
        let samples: Vec<&str> = out.lines().skip(2).collect();
        assert_eq!(
            samples,
            [
                "h_seconds_bucket{op=\"get\",le=\"0.001\"} 1",
                "h_seconds_bucket{op=\"get\",le=\"0.5\"} 3",
                "h_seconds_bucket{op=\"get\",le=\"+Inf\"} 4",
                "h_seconds_sum{op=\"get\"} 0.25",
                "h_seconds_count{op=\"get\"} 4",
            ]
        );
    }
}
