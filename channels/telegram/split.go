package telegram

import (
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxMessageLen is Telegram's limit on the text of one message.
const MaxMessageLen = 4096

// minLimit is the smallest limit Split honours; smaller ones are raised to it.
// A chunk must hold at least one escaped character ("&amp;" is 5 runes).
const minLimit = 16

// Chunk is one Telegram message's worth of a Markdown text.
type Chunk struct {
	// Source is the part of the Markdown input this chunk shows. The Sources
	// of all chunks, in order, concatenate to exactly the input.
	Source string
	// HTML is the chunk as Telegram HTML (see Render). Formatting
	// that spans chunks (a code block, a quote, bold text, a link) is closed
	// at the end of one chunk and reopened, identically, at the start of the
	// next.
	HTML string
}

// Split renders markdown like Render and cuts the result into chunks that
// each fit in one Telegram message: every chunk's HTML is at most limit runes
// long and its visible text (see VisibleLen) at most limit UTF-16 code units.
// Counting the runes of the HTML, tags and entities included, is stricter
// than Telegram, which counts only the visible text, but it bounds the request
// size too and needs no knowledge of Telegram's parser. Use MaxMessageLen as
// the limit for sendMessage; limits below 16 are raised to 16.
//
// Split cuts only between runes, never inside a tag or an entity, and
// prefers, in this order, a paragraph break (the first line of a block of
// goldmark's tree: a paragraph, heading, list item, code block, quote or
// table), a line break, the end of a sentence, a space, and any other place,
// except inside a grapheme cluster (a combining mark, an emoji sequence)
// unless it has to. A preferred cut is taken if it keeps the chunk
// at least half as long as the longest possible chunk; among cuts of one kind
// it takes the last.
//
// Guarantees, for any input: strings.Join of the Sources equals markdown; no
// chunk is empty; the visible texts of the chunks, concatenated, equal the
// visible text of Render(markdown). If the formatting open at a cut is too
// long to reopen within limit (only possible with very small limits), that
// chunk is sent without formatting rather than broken. A chunk may consist of
// whitespace only (for example when the input is mostly blank lines); Telegram
// rejects such a message, so the sender should skip it. Split returns nil for
// an empty input.
func Split(markdown string, limit int) []Chunk {
	if markdown == "" {
		return nil
	}
	s := &splitter{src: markdown, units: parse(markdown), limit: max(limit, minLimit)}
	return s.split()
}

// Kinds of cut, from most to least preferred.
const (
	cutParagraph = iota
	cutLine
	cutSentence
	cutSpace
	cutAnywhere
	cutInCluster
	numCutKinds
)

// splitter cuts a parsed text into chunks.
type splitter struct {
	src   string
	units []unit
	limit int
	// contentAfter[j] reports whether units[j:] has content.
	contentAfter []bool
}

func (s *splitter) split() []Chunk {
	n := len(s.units)
	s.contentAfter = make([]bool, n+1)
	for j := n - 1; j >= 0; j-- {
		s.contentAfter[j] = s.contentAfter[j+1] || s.units[j].content()
	}
	var chunks []Chunk
	var open []int // indexes of the units open at pos
	for pos := 0; pos < n; {
		formatted := true
		end := s.cut(pos, open, true)
		if end < 0 {
			formatted = false
			end = s.cut(pos, open, false)
		}
		if end < 0 {
			// Unreachable: without formatting, one content unit always fits.
			end = pos + 1
		}
		var c Chunk
		c, open = s.chunk(pos, end, open, formatted)
		chunks = append(chunks, c)
		pos = end
	}
	return chunks
}

// cut returns where the chunk starting at units[pos] should end, or -1 if no
// chunk fits. open lists the units open at pos. Without formatting, tags cost
// nothing.
func (s *splitter) cut(pos int, open []int, formatted bool) int {
	tag := func(runes int) int {
		if formatted {
			return runes
		}
		return 0
	}
	var closes []int // runes of the closing tags owed, innermost last
	size, closing := 0, 0
	for _, o := range open {
		size += tag(s.units[o].runes)
		c := tag(utf8.RuneCountInString(s.units[o].closeHTML))
		closes = append(closes, c)
		closing += c
	}
	vis, hasContent := 0, false
	var best, bestSize [numCutKinds]int
	for k := range best {
		best[k] = -1
	}
	longest, longestEnd := 0, -1
	n := len(s.units)
	for j := pos + 1; j <= n; j++ {
		u := &s.units[j-1]
		switch u.kind {
		case unitOpen:
			size += tag(u.runes)
			c := tag(utf8.RuneCountInString(u.closeHTML))
			closes = append(closes, c)
			closing += c
		case unitClose:
			size += tag(u.runes)
			closing -= closes[len(closes)-1]
			closes = closes[:len(closes)-1]
		default:
			size += u.runes
			vis += u.vis
			hasContent = hasContent || u.content()
		}
		if size > s.limit || vis > s.limit {
			break // size and vis only grow
		}
		// A chunk shows something, does not end right after an opening tag
		// or start with a closing one (which would leave empty tags), and
		// leaves something to show for the next chunk.
		if !hasContent || size+closing > s.limit {
			continue
		}
		if j == n {
			return n
		}
		if u.kind == unitOpen || s.units[j].kind == unitClose || !s.contentAfter[j] {
			continue
		}
		k := s.kind(j)
		best[k], bestSize[k] = j, size+closing
		if size+closing >= longest {
			longest, longestEnd = size+closing, j
		}
	}
	for k := range best {
		if best[k] >= 0 && 2*bestSize[k] >= longest {
			return best[k]
		}
	}
	return longestEnd
}

// kind classifies a cut just before units[j].
func (s *splitter) kind(j int) int {
	u := &s.units[j]
	before := s.src[:u.start]
	if strings.HasSuffix(before, "\n") {
		if u.blockStart {
			return cutParagraph
		}
		return cutLine
	}
	prev, size := utf8.DecodeLastRuneInString(before)
	switch {
	case prev == ' ' || prev == '\t':
		if end, _ := utf8.DecodeLastRuneInString(before[:len(before)-size]); strings.ContainsRune(".!?;:", end) {
			return cutSentence
		}
		return cutSpace
	case strings.ContainsRune("。！？", prev):
		return cutSentence
	case strings.ContainsRune("，、；：", prev):
		return cutSpace
	}
	next, _ := utf8.DecodeRuneInString(s.src[u.start:])
	if inCluster(prev, next) {
		return cutInCluster
	}
	return cutAnywhere
}

// inCluster reports whether a cut between prev and next would likely break a
// grapheme cluster: a combining mark, a joined or modified emoji, a flag, or
// a CRLF.
func inCluster(prev, next rune) bool {
	switch {
	case unicode.In(next, unicode.Mn, unicode.Me, unicode.Mc),
		prev == '\u200d' || next == '\u200d',
		'\ufe00' <= next && next <= '\ufe0f',
		0xe0100 <= next && next <= 0xe01ef,
		0x1f3fb <= next && next <= 0x1f3ff,
		0xe0020 <= next && next <= 0xe007f,
		isRegional(prev) && isRegional(next),
		prev == '\r' && next == '\n':
		return true
	}
	return false
}

func isRegional(r rune) bool { return 0x1f1e6 <= r && r <= 0x1f1ff }

// chunk builds the chunk of units[pos:end]; open lists the units open at pos.
// It returns the chunk and the units open at end.
func (s *splitter) chunk(pos, end int, open []int, formatted bool) (Chunk, []int) {
	var b strings.Builder
	if formatted {
		for _, o := range open {
			b.WriteString(s.units[o].html)
		}
	}
	open = slices.Clone(open)
	for j := pos; j < end; j++ {
		u := &s.units[j]
		switch u.kind {
		case unitOpen:
			open = append(open, j)
		case unitClose:
			open = open[:len(open)-1]
		}
		if formatted || u.kind == unitText || u.kind == unitAtom {
			b.WriteString(u.html)
		}
	}
	if formatted {
		for k := len(open) - 1; k >= 0; k-- {
			b.WriteString(s.units[open[k]].closeHTML)
		}
	}
	srcEnd := len(s.src)
	if end < len(s.units) {
		srcEnd = s.units[end].start
	}
	return Chunk{Source: s.src[s.units[pos].start:srcEnd], HTML: b.String()}, open
}
