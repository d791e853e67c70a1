package telegram

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// The tests' check of the HTML Render and Split produce: stricter than
// Telegram (and than tgtest's server), it also holds the renderer to the
// nesting rules of Telegram's entities.

// allowedTags are the tags ValidHTML accepts: the subset of Telegram's HTML
// parse mode this package may produce, plus the common synonyms.
var allowedTags = map[string]bool{
	"b": true, "strong": true, "i": true, "em": true, "u": true, "s": true,
	"code": true, "pre": true, "a": true, "blockquote": true, "tg-spoiler": true,
}

// ValidHTML reports whether html is acceptable to Telegram's HTML parse mode
// under the rules this package relies on. It checks that:
//   - html is valid UTF-8;
//   - only the tags b, strong, i, em, u, s, code, pre, a, blockquote and
//     tg-spoiler are used, with no attributes except href on a (required) and
//     class="language-…" on a code directly inside pre;
//   - tags are balanced and properly nested;
//   - the nesting follows Telegram's entity rules: code and pre contain no
//     tags (except one code right inside pre), a contains no a, code or pre,
//     and blockquote is not nested;
//   - text contains no bare '<' or '>', and every '&' starts one of &amp;
//     &lt; &gt; &quot;; attribute values contain no bare '<', '>' or '"'.
func ValidHTML(html string) error {
	if !utf8.ValidString(html) {
		return errors.New("html: invalid UTF-8")
	}
	var stack []string
	inside := func(name string) bool {
		for _, s := range stack {
			if s == name {
				return true
			}
		}
		return false
	}
	for i := 0; i < len(html); {
		switch html[i] {
		case '>':
			return fmt.Errorf("html: bare '>' at %d", i)
		case '&':
			name, ok := entityAt(html, i)
			if !ok {
				return fmt.Errorf("html: bad entity at %d", i)
			}
			i += len(name)
			continue
		case '<':
			end := strings.IndexByte(html[i:], '>')
			if end < 0 {
				return fmt.Errorf("html: unterminated tag at %d", i)
			}
			tag, prev := html[i+1:i+end], html[:i]
			i += end + 1
			if closing, ok := strings.CutPrefix(tag, "/"); ok {
				if len(stack) == 0 || stack[len(stack)-1] != closing {
					return fmt.Errorf("html: unexpected </%s>", closing)
				}
				stack = stack[:len(stack)-1]
				// A code inside pre must be the whole content of the pre.
				if closing == "code" && len(stack) > 0 && stack[len(stack)-1] == "pre" &&
					!strings.HasPrefix(html[i:], "</pre>") {
					return errors.New("html: text after </code> inside pre")
				}
				continue
			}
			name, attrs, _ := strings.Cut(tag, " ")
			if !allowedTags[name] {
				return fmt.Errorf("html: tag <%s> not allowed", name)
			}
			if err := checkAttrs(name, attrs, len(stack) > 0 && stack[len(stack)-1] == "pre"); err != nil {
				return err
			}
			if len(stack) > 0 {
				switch parent := stack[len(stack)-1]; {
				case parent == "pre":
					if name != "code" || !strings.HasSuffix(prev, "<pre>") {
						return fmt.Errorf("html: <%s> inside <pre>", name)
					}
				case parent == "code":
					return fmt.Errorf("html: <%s> inside <code>", name)
				}
			}
			switch {
			case name == "a" && inside("a"),
				(name == "code" || name == "pre") && inside("a"):
				return fmt.Errorf("html: <%s> inside <a>", name)
			case name == "blockquote" && inside("blockquote"):
				return errors.New("html: nested <blockquote>")
			}
			stack = append(stack, name)
			continue
		}
		_, size := utf8.DecodeRuneInString(html[i:])
		i += size
	}
	if len(stack) > 0 {
		return fmt.Errorf("html: unclosed <%s>", stack[len(stack)-1])
	}
	return nil
}

// checkAttrs validates the attribute text of an opening tag.
func checkAttrs(name, attrs string, inPre bool) error {
	var value string
	switch {
	case name == "a":
		v, ok := strings.CutPrefix(attrs, `href="`)
		if !ok {
			return errors.New(`html: <a> without href`)
		}
		value = v
	case name == "code" && inPre && attrs != "":
		v, ok := strings.CutPrefix(attrs, `class="language-`)
		if !ok {
			return fmt.Errorf("html: bad <code> attributes %q", attrs)
		}
		value = v
	case attrs != "":
		return fmt.Errorf("html: unexpected attributes on <%s>", name)
	default:
		return nil
	}
	v, ok := strings.CutSuffix(value, `"`)
	if !ok || strings.ContainsAny(v, `"<>`) {
		return fmt.Errorf("html: bad attribute value on <%s>", name)
	}
	for j := strings.IndexByte(v, '&'); j >= 0; j = strings.IndexByte(v, '&') {
		e, ok := entityAt(v, j)
		if !ok {
			return fmt.Errorf("html: bad entity in attribute of <%s>", name)
		}
		v = v[j+len(e):]
	}
	return nil
}
