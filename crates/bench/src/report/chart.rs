//! [`LineChart`]: what a figure shows (title, axes, series), drawn as SVG by `plotters`.
//!
//! Log axes are drawn as linear axes over `log10` of the values with power-of-ten labels, so
//! one drawing routine serves all four axis combinations. The legend sits right of the plot.
//! Text is measured with an embedded DejaVu Sans (`assets/`), so no system font library is
//! needed; the SVG names the `sans-serif` family and any viewer's font draws it.

use std::sync::OnceLock;

use plotters::prelude::*;
use plotters::style::{FontStyle, register_font};

use super::ReportError;

/// One curve of a chart.
#[derive(Clone, Debug, PartialEq)]
pub struct Series {
    /// The legend entry.
    pub name: String,
    /// The points `(x, y)`; non-finite values, and non-positive ones on a log axis, are skipped.
    pub points: Vec<(f64, f64)>,
    /// Dashed without markers (closed forms, bounds) rather than solid with markers.
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

const WIDTH: u32 = 760;
const HEIGHT: u32 = 460;
const LEGEND_WIDTH: u32 = 200;
const COLORS: [(u8, u8, u8); 10] = [
    (0x1f, 0x77, 0xb4),
    (0xd6, 0x27, 0x28),
    (0x2c, 0xa0, 0x2c),
    (0xff, 0x7f, 0x0e),
    (0x94, 0x67, 0xbd),
    (0x8c, 0x56, 0x4b),
    (0xe3, 0x77, 0xc2),
    (0x7f, 0x7f, 0x7f),
    (0xbc, 0xbd, 0x22),
    (0x17, 0xbe, 0xcf),
];
const FONT: &[u8] = include_bytes!("../../assets/DejaVuSans.ttf");

/// Registers the embedded font once per process.
fn font_ready() -> Result<(), ReportError> {
    static REGISTERED: OnceLock<bool> = OnceLock::new();
    let ok = *REGISTERED.get_or_init(|| register_font("sans-serif", FontStyle::Normal, FONT).is_ok());
    if ok { Ok(()) } else { Err(ReportError::Chart("the embedded font does not load".into())) }
}

/// One axis: whether it is logarithmic, and the drawn range (in log10 units when it is).
#[derive(Clone, Copy, Debug)]
struct Axis {
    log: bool,
    lo: f64,
    hi: f64,
}

impl Axis {
    fn new(values: impl Iterator<Item = f64>, log: bool) -> Axis {
        let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
        for v in values.filter(|&v| accepts(log, v)) {
            let v = if log { v.log10() } else { v };
            (lo, hi) = (lo.min(v), hi.max(v));
        }
        if !lo.is_finite() {
            (lo, hi) = (0.0, 1.0);
        }
        if log {
            (lo, hi) = (lo.floor(), hi.ceil());
        } else {
            let pad = (hi - lo) * 0.05;
            (lo, hi) = (if lo >= 0.0 && lo - pad < 0.0 { 0.0 } else { lo - pad }, hi + pad);
        }
        if hi <= lo {
            (lo, hi) = (lo - 1.0, hi + 1.0);
        }
        Axis { log, lo, hi }
    }

    /// Where `v` is drawn (log10 of it on a log axis).
    fn map(&self, v: f64) -> f64 {
        if self.log { v.log10() } else { v }
    }

    /// The tick label of a drawn coordinate.
    fn label(&self, drawn: f64) -> String {
        if !self.log {
            return format_number(drawn);
        }
        let rounded = drawn.round();
        if (drawn - rounded).abs() > 1e-9 {
            return format_number(10f64.powf(drawn));
        }
        match rounded as i32 {
            0 => "1".into(),
            1 => "10".into(),
            e => format!("1e{e}"),
        }
    }

    /// How many labels to ask for: one per power of ten on a log axis.
    fn label_count(&self) -> usize {
        if self.log { ((self.hi - self.lo).round() as usize + 1).min(10) } else { 7 }
    }
}

fn accepts(log: bool, v: f64) -> bool {
    v.is_finite() && (!log || v > 0.0)
}

/// A short label for a tick value.
pub fn format_number(v: f64) -> String {
    let a = v.abs();
    if a < 1e-12 {
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

impl LineChart {
    /// The chart as a standalone SVG document.
    pub fn to_svg(&self) -> Result<String, ReportError> {
        font_ready()?;
        let mut svg = String::new();
        self.draw(&mut svg).map_err(|e| ReportError::Chart(format!("{}: {e}", self.title)))?;
        Ok(svg + "\n")
    }

    fn draw(&self, svg: &mut String) -> Result<(), Box<dyn std::error::Error + '_>> {
        let points = || self.series.iter().flat_map(|s| s.points.iter().copied());
        let x = Axis::new(points().map(|p| p.0), self.log_x);
        let y = Axis::new(points().map(|p| p.1), self.log_y);
        let root = SVGBackend::with_string(svg, (WIDTH, HEIGHT)).into_drawing_area();
        root.fill(&WHITE)?;
        // The title centred over the whole figure, so long titles are not cut.
        let below_title = root.titled(&self.title, ("sans-serif", 19))?;
        let (plot_area, legend_area) = below_title.split_horizontally(WIDTH - LEGEND_WIDTH);
        let mut chart = ChartBuilder::on(&plot_area)
            .margin(12)
            .x_label_area_size(44)
            .y_label_area_size(64)
            .build_cartesian_2d(x.lo..x.hi, y.lo..y.hi)?;
        chart
            .configure_mesh()
            .light_line_style(WHITE)
            .bold_line_style(RGBColor(0xe5, 0xe5, 0xe5))
            .x_labels(x.label_count())
            .y_labels(y.label_count())
            .x_label_formatter(&|v| x.label(*v))
            .y_label_formatter(&|v| y.label(*v))
            .x_desc(&self.x_label)
            .y_desc(&self.y_label)
            .label_style(("sans-serif", 15))
            .axis_desc_style(("sans-serif", 15))
            .draw()?;
        chart.draw_series(std::iter::once(Rectangle::new(
            [(x.lo, y.lo), (x.hi, y.hi)],
            BLACK.stroke_width(1),
        )))?;
        for (k, series) in self.series.iter().enumerate() {
            let (r, g, b) = COLORS[k % COLORS.len()];
            let color = RGBColor(r, g, b);
            let mut drawn: Vec<(f64, f64)> = series
                .points
                .iter()
                .filter(|&&(px, py)| accepts(x.log, px) && accepts(y.log, py))
                .map(|&(px, py)| (x.map(px), y.map(py)))
                .collect();
            drawn.sort_by(|a, b| a.0.total_cmp(&b.0));
            let style = color.stroke_width(2);
            if series.dashed {
                chart.draw_series(DashedLineSeries::new(drawn, 6, 4, style))?;
            } else {
                chart.draw_series(LineSeries::new(drawn.clone(), style))?;
                chart.draw_series(drawn.into_iter().map(|p| Circle::new(p, 3, color.filled())))?;
            }
            let row = 24 + 20 * k as i32;
            let line: Vec<(i32, i32)> = vec![(10, row), (34, row)];
            if series.dashed {
                legend_area.draw(&PathElement::new(vec![(10, row), (18, row)], style))?;
                legend_area.draw(&PathElement::new(vec![(24, row), (34, row)], style))?;
            } else {
                legend_area.draw(&PathElement::new(line, style))?;
            }
            let text = Text::new(series.name.clone(), (40, row - 7), ("sans-serif", 15).into_font());
            legend_area.draw(&text)?;
        }
        root.present()?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn draws_series_legend_and_escapes_text() {
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
        let svg = chart.to_svg().unwrap();
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        assert!(svg.contains("a &lt; b"), "{svg}");
        assert!(svg.contains("Theorem 1") && svg.contains(">\n1e3\n<") || svg.contains("1e3"));
        // The zero on a log axis is skipped, not drawn at -infinity.
        assert!(!svg.contains("NaN") && !svg.contains("inf"));
    }

    #[test]
    fn empty_and_flat_charts_do_not_break() {
        assert!(LineChart::default().to_svg().unwrap().contains("</svg>"));
        let flat = LineChart {
            series: vec![Series::solid("c", vec![(1.0, 5.0), (2.0, 5.0)])],
            ..Default::default()
        };
        assert!(!flat.to_svg().unwrap().contains("NaN"));
    }

    #[test]
    fn number_labels() {
        assert_eq!(format_number(0.0), "0");
        assert_eq!(format_number(2.5), "2.5");
        assert_eq!(format_number(300.0), "300");
        assert_eq!(format_number(2_000_000.0), "2.0e6");
        let log = Axis { log: true, lo: 3.0, hi: 6.0 };
        assert_eq!((log.label(3.0), log.label(0.0), log.label(1.0)), ("1e3".into(), "1".into(), "10".into()));
    }
}
