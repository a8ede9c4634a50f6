//! [`LineChart`]: a dependency-free SVG line chart (linear or log axes, solid or dashed series,
//! a legend), enough for the papers' figures and readable in any browser or Markdown viewer.

use std::fmt::Write as _;

/// One curve of a chart.
#[derive(Clone, Debug, PartialEq)]
pub struct Series {
    /// The legend entry.
    pub name: String,
    /// The points `(x, y)`; non-finite values, and non-positive ones on a log axis, are skipped.
    pub points: Vec<(f64, f64)>,
    /// Draw dashed (for closed forms and bounds) rather than solid with markers.
    pub dashed: bool,
}

impl Series {
    /// A solid series with markers.
    pub fn solid(name: impl Into<String>, points: Vec<(f64, f64)>) -> Self {
        Series { name: name.into(), points, dashed: false }
    }

    /// A dashed series without markers.
    pub fn dashed(name: impl Into<String>, points: Vec<(f64, f64)>) -> Self {
        Series { name: name.into(), points, dashed: true }
    }
}

/// A line chart.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct LineChart {
    /// The title above the plot.
    pub title: String,
    /// The x-axis label.
    pub x_label: String,
    /// The y-axis label.
    pub y_label: String,
    /// Logarithmic x axis.
    pub log_x: bool,
    /// Logarithmic y axis.
    pub log_y: bool,
    /// The curves.
    pub series: Vec<Series>,
}

const WIDTH: f64 = 760.0;
const HEIGHT: f64 = 460.0;
const LEFT: f64 = 80.0;
const RIGHT: f64 = 200.0;
const TOP: f64 = 40.0;
const BOTTOM: f64 = 60.0;
const COLORS: [&str; 10] = [
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
    "#17becf",
];

/// One axis: data range, scale and ticks.
struct Axis {
    log: bool,
    lo: f64,
    hi: f64,
}

impl Axis {
    fn new(values: impl Iterator<Item = f64>, log: bool) -> Axis {
        let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
        for v in values {
            let v = if log { v.log10() } else { v };
            lo = lo.min(v);
            hi = hi.max(v);
        }
        if !lo.is_finite() {
            (lo, hi) = (0.0, 1.0);
        }
        if log {
            (lo, hi) = (lo.floor(), hi.ceil());
        } else if hi <= lo {
            (lo, hi) = (lo - 1.0, hi + 1.0);
        } else {
            let pad = (hi - lo) * 0.05;
            (lo, hi) = (if lo >= 0.0 && lo - pad < 0.0 { 0.0 } else { lo - pad }, hi + pad);
        }
        if hi <= lo {
            hi = lo + 1.0;
        }
        Axis { log, lo, hi }
    }

    fn accepts(&self, v: f64) -> bool {
        v.is_finite() && (!self.log || v > 0.0)
    }

    /// Position of `v` in `[0, 1]` along the axis.
    fn frac(&self, v: f64) -> f64 {
        let v = if self.log { v.log10() } else { v };
        (v - self.lo) / (self.hi - self.lo)
    }

    /// Tick values (in data units) and their labels.
    fn ticks(&self) -> Vec<(f64, String)> {
        if self.log {
            let step = ((self.hi - self.lo) / 8.0).ceil().max(1.0) as i32;
            return (self.lo as i32..=self.hi as i32)
                .step_by(step as usize)
                .map(|e| (10f64.powi(e), format_power(e)))
                .collect();
        }
        let raw = (self.hi - self.lo) / 6.0;
        let magnitude = 10f64.powf(raw.log10().floor());
        let step =
            [1.0, 2.0, 2.5, 5.0, 10.0].iter().map(|m| m * magnitude).find(|&s| s >= raw).unwrap_or(raw);
        let mut ticks = Vec::new();
        let mut t = (self.lo / step).ceil() * step;
        while t <= self.hi + step * 1e-9 {
            ticks.push((t, format_number(t)));
            t += step;
        }
        ticks
    }
}

fn format_power(e: i32) -> String {
    match e {
        0 => "1".into(),
        1 => "10".into(),
        _ => format!("1e{e}"),
    }
}

/// A short label for a tick value.
pub fn format_number(v: f64) -> String {
    let a = v.abs();
    if a == 0.0 {
        "0".into()
    } else if !(1e-3..1e6).contains(&a) {
        format!("{v:.1e}")
    } else if (v - v.round()).abs() < 1e-9 {
        format!("{}", v.round() as i64)
    } else {
        let s = format!("{v:.3}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    }
}

/// Escapes text for SVG.
fn escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

impl LineChart {
    /// The chart as a standalone SVG document.
    pub fn to_svg(&self) -> String {
        let (x_axis, y_axis) = self.axes();
        let plot_w = WIDTH - LEFT - RIGHT;
        let plot_h = HEIGHT - TOP - BOTTOM;
        let px = |x: f64| LEFT + x_axis.frac(x) * plot_w;
        let py = |y: f64| TOP + (1.0 - y_axis.frac(y)) * plot_h;
        let mut s = String::new();
        let _ = write!(
            s,
            r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="12">"#
        );
        let _ = write!(s, r#"<rect width="100%" height="100%" fill="white"/>"#);
        let _ = write!(
            s,
            r#"<text x="{}" y="22" text-anchor="middle" font-size="15">{}</text>"#,
            LEFT + plot_w / 2.0,
            escape(&self.title)
        );
        for (v, label) in x_axis.ticks() {
            let x = px(v);
            let _ = write!(
                s,
                r##"<line x1="{x:.1}" y1="{TOP}" x2="{x:.1}" y2="{:.1}" stroke="#e5e5e5"/><text x="{x:.1}" y="{:.1}" text-anchor="middle">{}</text>"##,
                TOP + plot_h,
                TOP + plot_h + 18.0,
                escape(&label)
            );
        }
        for (v, label) in y_axis.ticks() {
            let y = py(v);
            let _ = write!(
                s,
                r##"<line x1="{LEFT}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#e5e5e5"/><text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"##,
                LEFT + plot_w,
                LEFT - 6.0,
                y + 4.0,
                escape(&label)
            );
        }
        let _ = write!(
            s,
            r#"<rect x="{LEFT}" y="{TOP}" width="{plot_w}" height="{plot_h}" fill="none" stroke="black"/>"#
        );
        let _ = write!(
            s,
            r#"<text x="{}" y="{}" text-anchor="middle">{}</text>"#,
            LEFT + plot_w / 2.0,
            HEIGHT - 15.0,
            escape(&self.x_label)
        );
        let _ = write!(
            s,
            r#"<text transform="translate(18 {}) rotate(-90)" text-anchor="middle">{}</text>"#,
            TOP + plot_h / 2.0,
            escape(&self.y_label)
        );
        for (k, series) in self.series.iter().enumerate() {
            let color = COLORS[k % COLORS.len()];
            let dash = if series.dashed { r#" stroke-dasharray="6 4""# } else { "" };
            let mut points: Vec<(f64, f64)> = series
                .points
                .iter()
                .copied()
                .filter(|&(x, y)| x_axis.accepts(x) && y_axis.accepts(y))
                .collect();
            points.sort_by(|a, b| a.0.total_cmp(&b.0));
            let path: Vec<String> =
                points.iter().map(|&(x, y)| format!("{:.1},{:.1}", px(x), py(y))).collect();
            let _ = write!(
                s,
                r#"<polyline fill="none" stroke="{color}" stroke-width="2"{dash} points="{}"/>"#,
                path.join(" ")
            );
            if !series.dashed {
                for &(x, y) in &points {
                    let _ =
                        write!(s, r#"<circle cx="{:.1}" cy="{:.1}" r="3" fill="{color}"/>"#, px(x), py(y));
                }
            }
            let ly = TOP + 10.0 + 20.0 * k as f64;
            let lx = LEFT + plot_w + 12.0;
            let _ = write!(
                s,
                r#"<line x1="{lx}" y1="{ly}" x2="{}" y2="{ly}" stroke="{color}" stroke-width="2"{dash}/><text x="{}" y="{}">{}</text>"#,
                lx + 24.0,
                lx + 30.0,
                ly + 4.0,
                escape(&series.name)
            );
        }
        s.push_str("</svg>\n");
        s
    }

    fn axes(&self) -> (Axis, Axis) {
        let finite = |log: bool, v: f64| v.is_finite() && (!log || v > 0.0);
        let points = || self.series.iter().flat_map(|s| s.points.iter().copied());
        let x = Axis::new(points().map(|p| p.0).filter(|&v| finite(self.log_x, v)), self.log_x);
        let y = Axis::new(points().map(|p| p.1).filter(|&v| finite(self.log_y, v)), self.log_y);
        (x, y)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_series_legend_and_escapes_text() {
        let chart = LineChart {
            title: "a < b".into(),
            x_label: "alpha".into(),
            y_label: "packets".into(),
            log_y: true,
            series: vec![
                Series::solid("coded", vec![(0.1, 1000.0), (0.5, 100.0)]),
                Series::dashed("Theorem 1", vec![(0.1, 800.0), (0.5, 0.0)]),
            ],
            ..Default::default()
        };
        let svg = chart.to_svg();
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        assert!(svg.contains("a &lt; b"));
        assert_eq!(svg.matches("<polyline").count(), 2);
        assert!(svg.contains("stroke-dasharray"));
        assert!(svg.contains(">1e3<") || svg.contains(">1000<"));
        // The zero on a log axis is skipped, not drawn at -infinity.
        assert!(!svg.contains("NaN") && !svg.contains("inf"));
    }

    #[test]
    fn empty_and_flat_charts_do_not_break() {
        assert!(LineChart::default().to_svg().contains("</svg>"));
        let flat = LineChart {
            series: vec![Series::solid("c", vec![(1.0, 5.0), (2.0, 5.0)])],
            ..Default::default()
        };
        assert!(!flat.to_svg().contains("NaN"));
    }

    #[test]
    fn number_labels() {
        assert_eq!(format_number(0.0), "0");
        assert_eq!(format_number(2.5), "2.5");
        assert_eq!(format_number(300.0), "300");
        assert_eq!(format_number(2_000_000.0), "2.0e6");
    }
}
