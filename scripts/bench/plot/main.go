// Command plot draws line charts as SVG for docs/BENCHMARKS.md, from
// series files of "x y" lines (one point a line; other lines are skipped).
//
//	go run ./scripts/bench/plot -o docs/bench/build.svg -title "Build p95" -x rows -y ms -logx a.txt=label ...
package main

import (
	"bufio"
	"flag"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
)

type series struct {
	label string
	x, y  []float64
}

var colors = []string{"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b"}

func main() {
	out := flag.String("o", "plot.svg", "output SVG")
	title := flag.String("title", "", "title")
	xl := flag.String("x", "", "x axis label")
	yl := flag.String("y", "", "y axis label")
	logx := flag.Bool("logx", false, "logarithmic x axis")
	flag.Parse()
	var all []series
	for _, arg := range flag.Args() {
		path, label, _ := strings.Cut(arg, "=")
		s, err := read(path, label)
		if err != nil {
			fmt.Fprintln(os.Stderr, "plot:", err)
			os.Exit(1)
		}
		if len(s.x) > 0 {
			all = append(all, s)
		}
	}
	if len(all) == 0 {
		fmt.Fprintln(os.Stderr, "plot: no data")
		os.Exit(1)
	}
	if err := os.WriteFile(*out, []byte(svg(all, *title, *xl, *yl, *logx)), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "plot:", err)
		os.Exit(1)
	}
}

func read(path, label string) (series, error) {
	f, err := os.Open(path)
	if err != nil {
		return series{}, err
	}
	defer f.Close()
	s := series{label: label}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) < 2 {
			continue
		}
		x, err1 := strconv.ParseFloat(fs[0], 64)
		y, err2 := strconv.ParseFloat(fs[1], 64)
		if err1 == nil && err2 == nil {
			s.x, s.y = append(s.x, x), append(s.y, y)
		}
	}
	return s, sc.Err()
}

func svg(all []series, title, xl, yl string, logx bool) string {
	const W, H, L, R, T, B = 720.0, 400.0, 70.0, 170.0, 40.0, 50.0
	tx := func(v float64) float64 {
		if logx {
			return math.Log10(v)
		}
		return v
	}
	xmin, xmax, ymax := math.Inf(1), math.Inf(-1), 0.0
	for _, s := range all {
		for i := range s.x {
			xmin, xmax = math.Min(xmin, tx(s.x[i])), math.Max(xmax, tx(s.x[i]))
			ymax = math.Max(ymax, s.y[i])
		}
	}
	if xmax == xmin {
		xmax = xmin + 1
	}
	ymax = niceCeil(ymax)
	px := func(x float64) float64 { return L + (tx(x)-xmin)/(xmax-xmin)*(W-L-R) }
	py := func(y float64) float64 { return H - B - y/ymax*(H-T-B) }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" font-family="sans-serif" font-size="12">`+"\n", W, H)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/><text x="%.0f" y="22" font-size="15" font-weight="bold">%s</text>`+"\n", L, esc(title))
	for i := 0; i <= 5; i++ {
		y := ymax * float64(i) / 5
		fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="#ddd"/><text x="%.1f" y="%.1f" text-anchor="end">%s</text>`+"\n",
			L, W-R, py(y), py(y), L-6, py(y)+4, num(y))
	}
	ticks := xticks(all, logx, xmin, xmax)
	for _, x := range ticks {
		fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="#eee"/><text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n",
			px(x), px(x), T, H-B, px(x), H-B+16, num(x))
	}
	fmt.Fprintf(&b, `<rect x="%.0f" y="%.0f" width="%.0f" height="%.0f" fill="none" stroke="#444"/>`+"\n", L, T, W-L-R, H-T-B)
	fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" text-anchor="middle">%s</text>`+"\n", L+(W-L-R)/2, H-12, esc(xl))
	fmt.Fprintf(&b, `<text transform="translate(16 %.0f) rotate(-90)" text-anchor="middle">%s</text>`+"\n", T+(H-T-B)/2, esc(yl))
	for i, s := range all {
		c := colors[i%len(colors)]
		var pts []string
		for j := range s.x {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", px(s.x[j]), py(s.y[j])))
		}
		fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="1.8" points="%s"/>`+"\n", c, strings.Join(pts, " "))
		if len(s.x) <= 20 {
			for j := range s.x {
				fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="3" fill="%s"/>`+"\n", px(s.x[j]), py(s.y[j]), c)
			}
		}
		ly := T + 14 + float64(i)*18
		fmt.Fprintf(&b, `<line x1="%.0f" x2="%.0f" y1="%.1f" y2="%.1f" stroke="%s" stroke-width="3"/><text x="%.0f" y="%.1f">%s</text>`+"\n",
			W-R+10, W-R+30, ly, ly, c, W-R+36, ly+4, esc(s.label))
	}
	b.WriteString("</svg>\n")
	return b.String()
}

func xticks(all []series, logx bool, xmin, xmax float64) []float64 {
	if logx {
		var t []float64
		for e := math.Floor(xmin); e <= math.Ceil(xmax); e++ {
			t = append(t, math.Pow(10, e))
		}
		return t
	}
	hi := niceCeil(xmax)
	var t []float64
	for i := 0; i <= 5; i++ {
		if v := hi * float64(i) / 5; v <= xmax {
			t = append(t, v)
		}
	}
	return t
}

func niceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}

func num(v float64) string {
	switch {
	case v >= 1e6:
		return strconv.FormatFloat(v/1e6, 'f', -1, 64) + "M"
	case v >= 1e3:
		return strconv.FormatFloat(v/1e3, 'f', -1, 64) + "k"
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

func esc(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}
