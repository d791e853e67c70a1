package telegram

import (
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// The four entities Telegram's HTML parse mode needs; the renderer emits no others.
var entities = map[string]string{
	"&amp;":  "&",
	"&lt;":   "<",
	"&gt;":   ">",
	"&quot;": `"`,
}

// textEscaper escapes text, attrEscaper a double-quoted attribute value.
var (
	textEscaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;")
	attrEscaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;")
)

// VisibleLen returns the length, in UTF-16 code units, of the text a Telegram
// user sees for html: tags removed and the entities &amp; &lt; &gt; &quot;
// decoded. This is the length Telegram checks against its 4096 limit. It is
// meant for HTML produced by Render and Split; anything it does not recognise
// is counted as text.
func VisibleLen(html string) int {
	n := 0
	for _, r := range visibleText(html) {
		n += utf16.RuneLen(r)
	}
	return n
}

// visibleText strips the tags of html and decodes its entities.
func visibleText(html string) string {
	var b strings.Builder
	for i := 0; i < len(html); {
		switch html[i] {
		case '<':
			if end := tagEnd(html, i); end > 0 {
				i = end
				continue
			}
		case '&':
			if name, ok := entityAt(html, i); ok {
				b.WriteString(entities[name])
				i += len(name)
				continue
			}
		}
		r, size := utf8.DecodeRuneInString(html[i:])
		b.WriteRune(r)
		i += size
	}
	return b.String()
}

// tagEnd returns the index just past the tag starting at html[i] == '<', or -1
// when the tag is not terminated. A '>' inside a quoted attribute value does not
// end the tag.
func tagEnd(html string, i int) int {
	quoted := false
	for j := i + 1; j < len(html); j++ {
		switch html[j] {
		case '"':
			quoted = !quoted
		case '>':
			if !quoted {
				return j + 1
			}
		}
	}
	return -1
}

// entityAt reports which of the four known entities starts at html[i].
func entityAt(html string, i int) (string, bool) {
	for name := range entities {
		if strings.HasPrefix(html[i:], name) {
			return name, true
		}
	}
	return "", false
}
