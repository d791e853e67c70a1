package main

import (
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/switchboard/switchboard/scripts/bench/internal/proc"
)

// target is one server of an interleaved comparison.
type target struct {
	label string
	c     *client
	pid   int
	lat   []time.Duration // by round
}

// parseTargets reads "label=url,label=url,…" and the matching pids
// ("pid,pid,…", or empty).
func parseTargets(spec, pids string, mk func(url string) *client) ([]*target, error) {
	var ts []*target
	for _, part := range strings.Split(spec, ",") {
		label, url, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok || label == "" || url == "" {
			return nil, fmt.Errorf("-ab %q: want label=url,label=url", spec)
		}
		ts = append(ts, &target{label: label, c: mk(url)})
	}
	if len(ts) < 2 {
		return nil, fmt.Errorf("-ab %q: want at least two servers", spec)
	}
	if pids != "" {
		ps := strings.Split(pids, ",")
		if len(ps) != len(ts) {
			return nil, fmt.Errorf("-ab-pids %q: want one pid per server", pids)
		}
		for i, p := range ps {
			n, err := strconv.Atoi(strings.TrimSpace(p))
			if err != nil {
				return nil, fmt.Errorf("-ab-pids %q: %w", pids, err)
			}
			ts[i].pid = n
		}
	}
	return ts, nil
}

// runAB sends round r's turn to every server in turn, the order rotated
// by one each round, so the machine's load (other processes, the shared
// PostgreSQL) falls on all of them alike; then compares each server with
// the first: its percentiles, the ratio of medians with a bootstrap 95%
// interval over rounds, and the per-round paired differences.
func runAB(ts []*target, user string, rounds, warm int, raw io.Writer, out func(string, any)) error {
	for _, t := range ts {
		for i := 0; i < warm; i++ {
			if _, err := t.c.turn(user, fmt.Sprintf("warm-up %d", i)); err != nil {
				return fmt.Errorf("%s warm-up turn %d: %w", t.label, i, err)
			}
		}
	}
	cpu0 := make([]float64, len(ts))
	for i, t := range ts {
		cpu0[i] = proc.CPUSeconds(t.pid)
	}
	k := len(ts)
	for r := 0; r < rounds; r++ {
		text := fmt.Sprintf("turn %d: the quick brown fox jumps over the lazy dog", r)
		for j := 0; j < k; j++ {
			t := ts[(r+j)%k]
			d, err := t.c.turn(user, text)
			if err != nil {
				return fmt.Errorf("%s round %d: %w", t.label, r, err)
			}
			t.lat = append(t.lat, d)
			if raw != nil {
				fmt.Fprintf(raw, "%d %d %s %s\n", r, j, t.label, ms(d))
			}
		}
	}
	out("ab_rounds", rounds)
	out("ab_order", "rotated by one each round")
	for i, t := range ts {
		s := slices.Clone(t.lat)
		sort.Slice(s, func(a, b int) bool { return s[a] < s[b] })
		out("ab_"+t.label+"_p50_ms", ms(pct(s, 0.50)))
		out("ab_"+t.label+"_p95_ms", ms(pct(s, 0.95)))
		out("ab_"+t.label+"_p99_ms", ms(pct(s, 0.99)))
		if t.pid != 0 {
			out("ab_"+t.label+"_cpu_ms_per_turn", fmt.Sprintf("%.2f", (proc.CPUSeconds(t.pid)-cpu0[i])*1000/float64(rounds)))
		}
	}
	ref := ts[0]
	for _, t := range ts[1:] {
		name := "ab_" + t.label + "_vs_" + ref.label
		for _, q := range []float64{0.50, 0.95} {
			ratio, lo, hi := bootstrapRatio(ref.lat, t.lat, q, 2000)
			qn := fmt.Sprintf("p%02.0f", q*100)
			out(name+"_"+qn+"_ratio", fmt.Sprintf("%.3f", ratio))
			out(name+"_"+qn+"_ratio_ci95", fmt.Sprintf("%.3f %.3f", lo, hi))
		}
		diff := make([]float64, rounds)
		rel := make([]float64, rounds)
		for r := range rounds {
			a, b := ref.lat[r].Seconds()*1000, t.lat[r].Seconds()*1000
			diff[r], rel[r] = b-a, b/a
		}
		slices.Sort(diff)
		slices.Sort(rel)
		out(name+"_paired_diff_ms_median", fmt.Sprintf("%.3f", fq(diff, 0.5)))
		out(name+"_paired_diff_ms_iqr", fmt.Sprintf("%.3f %.3f", fq(diff, 0.25), fq(diff, 0.75)))
		out(name+"_paired_ratio_median", fmt.Sprintf("%.3f", fq(rel, 0.5)))
		out(name+"_paired_ratio_iqr", fmt.Sprintf("%.3f %.3f", fq(rel, 0.25), fq(rel, 0.75)))
	}
	return nil
}

// bootstrapRatio is the ratio of b's to a's q-quantile over paired rounds,
// and its 95% percentile-bootstrap interval (rounds resampled with
// replacement, n times, fixed seed so a rerun on the same data agrees).
func bootstrapRatio(a, b []time.Duration, q float64, n int) (ratio, lo, hi float64) {
	quant := func(l []time.Duration, idx []int) float64 {
		s := make([]float64, len(idx))
		for i, j := range idx {
			s[i] = l[j].Seconds()
		}
		slices.Sort(s)
		return fq(s, q)
	}
	all := make([]int, len(a))
	for i := range all {
		all[i] = i
	}
	ratio = quant(b, all) / quant(a, all)
	rng := rand.New(rand.NewPCG(1, 2))
	rs := make([]float64, n)
	idx := make([]int, len(a))
	for k := range rs {
		for i := range idx {
			idx[i] = rng.IntN(len(a))
		}
		rs[k] = quant(b, idx) / quant(a, idx)
	}
	slices.Sort(rs)
	return ratio, fq(rs, 0.025), fq(rs, 0.975)
}

// fq is the q-quantile of sorted s (nearest rank below, as pct).
func fq(s []float64, q float64) float64 { return s[int(q*float64(len(s)-1))] }
