//! Line plots with optional error bars and log axes, to PNG, without system libraries (the
//! font is embedded: DejaVu Sans, see assets/DejaVuSans-LICENSE.txt).

use std::path::Path;
use std::sync::Once;

use anyhow::{Result, anyhow};
use plotters::prelude::*;

/// One curve.
#[derive(Clone, Debug)]
pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
    /// Optional `(low, high)` error bar per point.
    pub err: Option<Vec<(f64, f64)>>,
}

/// One chart: several panels make one PNG, in a grid (like the papers' (a), (b), (c)).
#[derive(Clone, Debug)]
pub struct Panel {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub log_x: bool,
    pub log_y: bool,
    pub series: Vec<Series>,
}

impl Panel {
    /// A panel over the loss rate (log scale), as the papers' loss sweeps draw theirs.
    pub fn over_loss_rate(title: &str, y: &str, log_y: bool, series: Vec<Series>) -> Panel {
        Panel {
            title: title.into(),
            x_label: "loss rate".into(),
            y_label: y.into(),
            log_x: true,
            log_y,
            series,
        }
    }
}

static FONT: Once = Once::new();

fn register_font() {
    FONT.call_once(|| {
        let bytes: &'static [u8] = include_bytes!("../../assets/DejaVuSans.ttf");
        // the embedded font is valid; if registration ever failed, text would be missing,
        // not the plot
        let _ = plotters::style::register_font("sans-serif", FontStyle::Normal, bytes);
    });
}

const COLORS: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
];

fn range(vals: impl Iterator<Item = f64>, log: bool) -> (f64, f64) {
    let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
    for v in vals.filter(|v| v.is_finite() && (!log || *v > 0.0)) {
        lo = lo.min(v);
        hi = hi.max(v);
    }
    if !lo.is_finite() {
        return if log { (0.1, 10.0) } else { (0.0, 1.0) };
    }
    if log {
        if hi / lo < 10.0 {
            (lo / 3.0, hi * 3.0)
        } else {
            (lo / 1.5, hi * 1.5)
        }
    } else {
        let pad = ((hi - lo) * 0.05).max(hi.abs() * 1e-3).max(1e-12);
        (lo - pad, hi + pad)
    }
}

/// A line along `floor`, named in the legend, when a point of `series` sits on it: where a
/// log axis cannot show an error of 0, the points drawn at the floor read as exact, not as an
/// error of `floor`.
pub fn exact_floor(series: &[Series], floor: f64) -> Option<Series> {
    let xs = || {
        series
            .iter()
            .flat_map(|s| s.points.iter().map(|p| p.0))
            .filter(|x| x.is_finite())
    };
    let on_floor = series.iter().flat_map(|s| &s.points).any(|p| p.1 <= floor);
    if !on_floor {
        return None;
    }
    let (lo, hi) = (
        xs().fold(f64::INFINITY, f64::min),
        xs().fold(f64::NEG_INFINITY, f64::max),
    );
    Some(Series {
        name: format!("exact (error 0), drawn at {}", tick(floor)),
        points: vec![(lo, floor), (hi, floor)],
        err: None,
    })
}

/// Columns and rows of the grid `n` panels are laid out in: as square as it can be, wider
/// than tall (1 → 1×1, 2 → 2×1, 3 and 4 → 2×2, 5 and 6 → 3×2), so a screen shows it whole
/// (four panels: 1280×960, not a 2560×480 strip).
pub fn grid(n: usize) -> (usize, usize) {
    let n = n.max(1);
    let cols = (1..=n).find(|c| c * c >= n).unwrap_or(n);
    (cols, n.div_ceil(cols))
}

/// Draw `panels` into one PNG, 640×480 each, in a [`grid`].
pub fn plot_png(path: &Path, panels: &[Panel]) -> Result<()> {
    register_font();
    let (cols, rows) = grid(panels.len());
    let (w, h) = (640 * cols as u32, 480 * rows as u32);
    let root = BitMapBackend::new(path, (w, h)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| anyhow!("{e:?}"))?;
    let areas = root.split_evenly((rows, cols));
    for (panel, area) in panels.iter().zip(areas) {
        draw_panel(panel, &area).map_err(|e| anyhow!("plotting {}: {e}", panel.title))?;
    }
    root.present()
        .map_err(|e| anyhow!("{}: {e:?}", path.display()))?;
    Ok(())
}

/// Axis tick text: at most 3 significant digits, powers of ten as `1e6` / `1e-4` (plotters'
/// default prints log-axis ticks such as 0.700000000000001).
fn tick(v: f64) -> String {
    if v == 0.0 || !v.is_finite() {
        return format!("{v}");
    }
    let a = v.abs();
    if !(1e-3..1e5).contains(&a) {
        let mut e = a.log10().floor() as i32;
        let mut m = ((v / 10f64.powi(e)) * 100.0).round() / 100.0;
        if m.abs() >= 10.0 {
            // 9.999e-8 rounds to 10: write 1e-7, not 10e-8
            m /= 10.0;
            e += 1;
        }
        return format!("{m}e{e}");
    }
    let digits = 2 - a.log10().floor() as i32;
    let scale = 10f64.powi(digits);
    let r = (v * scale).round() / scale;
    format!("{r}")
}

/// Tick text on a log axis spanning more than a decade: only mantissas 1, 2 and 5 are labelled
/// (the grid line stays), so labels do not pile up.
fn log_tick(v: f64, decades: f64) -> String {
    if decades > 1.0 && v > 0.0 {
        let m = v / 10f64.powf(v.log10().floor());
        let keep = [1.0, 2.0, 5.0, 10.0]
            .iter()
            .any(|k| (m - k).abs() < 1e-6 * k);
        if !keep {
            return String::new();
        }
    }
    tick(v)
}

/// Pixels of the plotting area's height (a 480-pixel panel less its caption, x labels and
/// margins), and of one legend entry.
const PLOT_HEIGHT: f64 = 380.0;
const LEGEND_ENTRY: f64 = 19.0;

/// The y range widened upwards so that the legend, drawn in the plot's upper left corner,
/// sits above every point and error bar: the data keep the lower part of the height, the
/// legend's `entries` lines and padding the upper.
fn legend_headroom(y0: f64, y1: f64, log: bool, entries: usize) -> (f64, f64) {
    if entries == 0 {
        return (y0, y1);
    }
    let legend = (entries as f64 * LEGEND_ENTRY + 24.0).min(0.6 * PLOT_HEIGHT);
    let keep = 1.0 - legend / PLOT_HEIGHT;
    if log {
        let (l0, l1) = (y0.log10(), y1.log10());
        (y0, 10f64.powf(l0 + (l1 - l0) / keep))
    } else {
        (y0, y0 + (y1 - y0) / keep)
    }
}

type Area<'a> = DrawingArea<BitMapBackend<'a>, plotters::coord::Shift>;

fn draw_panel(p: &Panel, area: &Area) -> Result<(), String> {
    let xs = p.series.iter().flat_map(|s| s.points.iter().map(|q| q.0));
    let ys = p.series.iter().flat_map(|s| {
        s.points
            .iter()
            .map(|q| q.1)
            .chain(s.err.iter().flatten().flat_map(|e| [e.0, e.1]))
    });
    let (x0, x1) = range(xs, p.log_x);
    let (y0, y1) = range(ys, p.log_y);
    let (y0, y1) = legend_headroom(y0, y1, p.log_y, p.series.len());
    let (xdec, ydec) = ((x1 / x0).log10(), (y1 / y0).log10());
    let mut b = ChartBuilder::on(area);
    b.caption(&p.title, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(64);
    macro_rules! draw {
        ($chart:expr) => {{
            let mut chart = $chart.map_err(|e| e.to_string())?;
            chart
                .configure_mesh()
                .x_desc(p.x_label.as_str())
                .y_desc(p.y_label.as_str())
                .label_style(("sans-serif", 13))
                .x_label_formatter(&|v| {
                    if p.log_x {
                        log_tick(*v, xdec)
                    } else {
                        tick(*v)
                    }
                })
                .y_label_formatter(&|v| {
                    if p.log_y {
                        log_tick(*v, ydec)
                    } else {
                        tick(*v)
                    }
                })
                .draw()
                .map_err(|e| e.to_string())?;
            // every series' points drawn over every line, the first series' last: a point a
            // later series crosses or covers (one on the "exact" floor) stays visible
            let mut points = Vec::new();
            for (i, s) in p.series.iter().enumerate() {
                let c = COLORS[i % COLORS.len()];
                // a point that cannot be drawn (NaN: no value there) breaks the line, so that
                // no line bridges a gap
                let mut runs: Vec<Vec<(f64, f64)>> = vec![Vec::new()];
                for &(x, y) in &s.points {
                    if x.is_finite()
                        && y.is_finite()
                        && (!p.log_x || x > 0.0)
                        && (!p.log_y || y > 0.0)
                    {
                        runs.last_mut().expect("one run at least").push((x, y));
                    } else if runs.last().is_some_and(|r| !r.is_empty()) {
                        runs.push(Vec::new());
                    }
                }
                let pts: Vec<(f64, f64)> = runs.iter().flatten().copied().collect();
                for (k, run) in runs.into_iter().enumerate() {
                    let drawn = chart
                        .draw_series(LineSeries::new(run, c.stroke_width(2)))
                        .map_err(|e| e.to_string())?;
                    if k == 0 {
                        drawn.label(s.name.as_str()).legend(move |(x, y)| {
                            PathElement::new(vec![(x, y), (x + 18, y)], c.stroke_width(2))
                        });
                    }
                }
                points.push((c, pts));
                if let Some(err) = &s.err {
                    let bars: Vec<_> = s
                        .points
                        .iter()
                        .zip(err)
                        .filter(|((x, _), (lo, hi))| {
                            x.is_finite()
                                && lo.is_finite()
                                && hi.is_finite()
                                && (!p.log_x || *x > 0.0)
                                && (!p.log_y || (*lo > 0.0 && *hi > 0.0))
                        })
                        .map(|(&(x, y), &(lo, hi))| {
                            ErrorBar::new_vertical(x, lo, y.clamp(lo, hi), hi, c.stroke_width(1), 6)
                        })
                        .collect();
                    chart.draw_series(bars).map_err(|e| e.to_string())?;
                }
            }
            for (c, pts) in points.into_iter().rev() {
                chart
                    .draw_series(pts.into_iter().map(|q| Circle::new(q, 3, c.filled())))
                    .map_err(|e| e.to_string())?;
            }
            chart
                .configure_series_labels()
                .background_style(WHITE.mix(0.85))
                .border_style(BLACK)
                .label_font(("sans-serif", 13))
                .position(SeriesLabelPosition::UpperLeft)
                .draw()
                .map_err(|e| e.to_string())?;
        }};
    }
    match (p.log_x, p.log_y) {
        (false, false) => draw!(b.build_cartesian_2d(x0..x1, y0..y1)),
        (true, false) => draw!(b.build_cartesian_2d((x0..x1).log_scale(), y0..y1)),
        (false, true) => draw!(b.build_cartesian_2d(x0..x1, (y0..y1).log_scale())),
        (true, true) => draw!(b.build_cartesian_2d((x0..x1).log_scale(), (y0..y1).log_scale())),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{Series, exact_floor, grid, legend_headroom, log_tick, tick};

    #[test]
    fn the_exact_floor_is_named_where_a_point_sits_on_it() {
        let s = |pts: &[(f64, f64)]| Series {
            name: "m".into(),
            points: pts.to_vec(),
            err: None,
        };
        assert!(exact_floor(&[s(&[(1.0, 0.1), (4.0, 0.01)])], 1e-5).is_none());
        let f = exact_floor(
            &[s(&[(1.0, 0.1), (4.0, 0.01)]), s(&[(2.0, 1e-5), (8.0, 0.5)])],
            1e-5,
        )
        .unwrap();
        assert_eq!(f.name, "exact (error 0), drawn at 1e-5");
        assert_eq!(f.points, [(1.0, 1e-5), (8.0, 1e-5)]);
    }

    #[test]
    fn panels_are_laid_out_in_a_grid() {
        assert_eq!(grid(1), (1, 1));
        assert_eq!(grid(2), (2, 1));
        assert_eq!(grid(3), (2, 2));
        assert_eq!(grid(4), (2, 2));
        assert_eq!(grid(5), (3, 2));
        assert_eq!(grid(6), (3, 2));
        assert_eq!(grid(9), (3, 3));
    }

    #[test]
    fn the_legend_sits_above_the_data() {
        // four entries: 100 px of 380 for the legend, the data below it
        let (lo, hi) = legend_headroom(0.0, 1.0, false, 4);
        assert_eq!(lo, 0.0);
        let top_of_data = (1.0 - lo) / (hi - lo) * 380.0;
        assert!((top_of_data - 280.0).abs() < 1e-9, "{top_of_data}");
        // on a log axis, in decades
        let (lo, hi) = legend_headroom(1e-5, 1e-1, true, 4);
        assert_eq!(lo, 1e-5);
        let top_of_data = 4.0 / (hi.log10() + 5.0) * 380.0;
        assert!((top_of_data - 280.0).abs() < 1e-6, "{top_of_data}");
        assert_eq!(legend_headroom(2.0, 3.0, false, 0), (2.0, 3.0));
    }

    #[test]
    fn ticks_are_short() {
        assert_eq!(tick(0.700_000_000_000_001), "0.7");
        assert_eq!(tick(0.300_000_000_000_000_04), "0.3");
        assert_eq!(tick(240.0), "240");
        assert_eq!(tick(1_000_000.0), "1e6");
        assert_eq!(tick(0.0001), "1e-4");
        assert_eq!(tick(0.015), "0.015");
        assert_eq!(tick(0.0), "0");
        assert_eq!(tick(9.999_999e-8), "1e-7");
        assert_eq!(log_tick(3e5, 2.0), "");
        assert_eq!(log_tick(5e5, 2.0), "5e5");
        assert_eq!(log_tick(3e5, 0.5), "3e5");
    }
}
