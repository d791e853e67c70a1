package prompt

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"unicode"

	"github.com/switchboard/switchboard/services"
)

// maxNamedRules bounds how many left-out rules CONTEXT_RULES_TRIMMED names.
const maxNamedRules = 20

// fitRules returns the rules layer's text within budget tokens. Rules that
// fit are sent whole, as before. When they do not, whole rules are kept in
// priority order: the owner's own (rules files and rules the owner wrote)
// before approved proposals of the agent, and within each, the most
// relevant to query first (BM25 over the rules' words; ties keep their
// order). The kept rules are written in their usual order. out marks the
// rules left out; when not even one rule fits, the text is cut as before
// (out nil, trimmed 1 or all).
func (l textLayer) fitRules(tok Tokenizer, budget int, query string) (text string, trimmed int, out []bool) {
	full := l.text(len(l.items))
	if len(l.items) == 0 || tok.Count(full)+MessageOverhead <= budget {
		return full, 0, nil
	}
	scores := bm25(l.items, services.RecallTerms(query))
	order := make([]int, len(l.items))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool {
		i, j := order[a], order[b]
		if l.explicit(i) != l.explicit(j) {
			return l.explicit(i)
		}
		return scores[i] > scores[j]
	})
	// Estimate with each rule's own count, then verify the joined text and
	// drop the lowest-priority kept rule while it does not fit.
	keep := make([]bool, len(l.items))
	var kept []int
	used := tok.Count(l.heading) + MessageOverhead
	for _, i := range order {
		if t := l.itemTokens(tok, i); used+t <= budget {
			keep[i], used = true, used+t
			kept = append(kept, i)
		}
	}
	for len(kept) > 0 {
		text = l.textOf(keep)
		if tok.Count(text)+MessageOverhead <= budget {
			break
		}
		keep[kept[len(kept)-1]] = false
		kept = kept[:len(kept)-1]
	}
	if len(kept) == 0 {
		text, trimmed = l.fit(tok, budget)
		return text, trimmed, nil
	}
	out = make([]bool, len(l.items))
	for i := range keep {
		out[i] = !keep[i]
	}
	return text, len(l.items) - len(kept), out
}

// itemTokens is item i's estimated share of the layer's tokens.
func (l textLayer) itemTokens(tok Tokenizer, i int) int {
	return tok.Count("\n" + l.items[i])
}

// estimate is fitRules' estimate of the tokens of the items want marks
// (0 when none): the heading, each item's own count and the overhead.
func (l textLayer) estimate(tok Tokenizer, want func(int) bool) int {
	n, some := tok.Count(l.heading)+MessageOverhead, false
	for i := range l.items {
		if want(i) {
			n, some = n+l.itemTokens(tok, i), true
		}
	}
	if !some {
		return 0
	}
	return n
}

// explicit reports whether item i is the owner's own (a rules file or a
// rule the owner wrote).
func (l textLayer) explicit(i int) bool {
	return i >= len(l.proposed) || !l.proposed[i]
}

// textOf is the layer's text of the items keep marks, in their order.
func (l textLayer) textOf(keep []bool) string {
	var b strings.Builder
	b.WriteString(l.heading)
	for i, k := range keep {
		if k {
			b.WriteString("\n" + l.items[i])
		}
	}
	return b.String()
}

// rulesTrimmedWarning names the rules out marks as left out.
func rulesTrimmedWarning(w *warningSet, l textLayer, out []bool, budget int) {
	var names []string
	n := 0
	for i, o := range out {
		if !o {
			continue
		}
		n++
		if len(names) < maxNamedRules {
			names = append(names, l.sources[i])
		}
	}
	if n == 0 {
		return
	}
	more := ""
	if n > len(names) {
		more = fmt.Sprintf(" and %d more", n-len(names))
	}
	w.add(CodeRulesTrimmed, "%d rules left out to fit the rules layer's %d tokens (the owner's own kept first, then the most relevant to the input): %s%s",
		n, budget, strings.Join(names, ", "), more)
}

// ruleWords are the words of a text as relevance counts them: lower case,
// letters and digits.
func ruleWords(text string) []string {
	return strings.FieldsFunc(strings.ToLower(text), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
}

// bm25 scores each document against the query terms (Okapi BM25, k1 1.2,
// b 0.75); no terms, every score 0.
func bm25(docs []string, terms []string) []float64 {
	scores := make([]float64, len(docs))
	if len(terms) == 0 || len(docs) == 0 {
		return scores
	}
	const k1, b = 1.2, 0.75
	tf := make([]map[string]int, len(docs))
	df := map[string]int{}
	total := 0
	for i, d := range docs {
		words := ruleWords(d)
		total += len(words)
		tf[i] = map[string]int{}
		for _, w := range words {
			if tf[i][w] == 0 {
				df[w]++
			}
			tf[i][w]++
		}
	}
	avg := math.Max(float64(total)/float64(len(docs)), 1)
	n := float64(len(docs))
	for i := range docs {
		length := 0
		for _, c := range tf[i] {
			length += c
		}
		for _, t := range terms {
			f := float64(tf[i][t])
			if f == 0 {
				continue
			}
			idf := math.Log(1 + (n-float64(df[t])+0.5)/(float64(df[t])+0.5))
			scores[i] += idf * f * (k1 + 1) / (f + k1*(1-b+b*float64(length)/avg))
		}
	}
	return scores
}
