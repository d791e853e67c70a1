package tui

import (
	"fmt"
	"strings"

	"github.com/charmbracelet/lipgloss"
	"github.com/yuin/goldmark/ast"
	east "github.com/yuin/goldmark/extension/ast"

	md "github.com/switchboard/switchboard/services/markdown"
	"github.com/switchboard/switchboard/web/wire"
)

// A minimal Markdown renderer for the terminal: answers are parsed by
// md.Parse (goldmark, GitHub-flavoured, the tree the web page
// renders too) and written back as text
// with terminal styles: headings and bold in bold, italics, inline code
// and code blocks set apart (code blocks behind a bar, never reflowed into
// prose), lists with bullets or numbers, links as "text (url)", tables as
// aligned columns, raw HTML as the text it is (the parse has no HTML
// blocks). Everything the model wrote is still sanitised: no escape
// sequence reaches the terminal.

var (
	boldStyle  = lipgloss.NewStyle().Bold(true)
	italStyle  = lipgloss.NewStyle().Italic(true)
	codeStyle  = lipgloss.NewStyle().Foreground(lipgloss.Color("180"))
	barStyle   = lipgloss.NewStyle().Foreground(lipgloss.Color("240"))
	linkStyle  = lipgloss.NewStyle().Foreground(lipgloss.Color("75")).Underline(true)
	toolOK     = lipgloss.NewStyle().Foreground(lipgloss.Color("42"))
	maxMDInput = 256 << 10
)

// markdown renders Markdown source as terminal text (lines joined by \n).
func markdown(src string) string {
	if len(src) > maxMDInput {
		return sanitize(src)
	}
	doc := md.Parse(src)
	r := &mdRenderer{src: doc.Source}
	r.blocks(doc.Root)
	return strings.TrimRight(r.out.String(), "\n")
}

type mdRenderer struct {
	src []byte
	out strings.Builder
}

// blocks writes the block children of n.
func (r *mdRenderer) blocks(n ast.Node) {
	for c := n.FirstChild(); c != nil; c = c.NextSibling() {
		if c != n.FirstChild() && c.Kind() != ast.KindListItem {
			r.out.WriteString("\n")
		}
		r.block(c)
	}
}

func (r *mdRenderer) line(s string) {
	r.out.WriteString(s + "\n")
}

// sub renders the blocks of n on their own and returns their lines.
func (r *mdRenderer) sub(n ast.Node) []string {
	s := mdRenderer{src: r.src}
	s.blocks(n)
	return strings.Split(strings.TrimRight(s.out.String(), "\n"), "\n")
}

func (r *mdRenderer) block(n ast.Node) {
	switch n := n.(type) {
	case *ast.Heading:
		r.line(boldStyle.Render(r.inline(n)))
	case *ast.Paragraph, *ast.TextBlock:
		r.line(r.inline(n))
	case *ast.FencedCodeBlock, *ast.CodeBlock:
		if fc, ok := n.(*ast.FencedCodeBlock); ok {
			if lang := string(fc.Language(r.src)); lang != "" {
				r.line(barStyle.Render("┌ " + sanitize(lang)))
			}
		}
		lines := n.Lines()
		for i := 0; i < lines.Len(); i++ {
			seg := lines.At(i)
			l := strings.TrimRight(sanitize(string(seg.Value(r.src))), "\n")
			r.line(barStyle.Render("│ ") + codeStyle.Render(l))
		}
	case *ast.List:
		i := n.Start
		for c := n.FirstChild(); c != nil; c = c.NextSibling() {
			mark := "• "
			if n.IsOrdered() {
				mark = fmt.Sprintf("%d. ", i)
				i++
			}
			prefix := mark // then the continuation lines are indented
			for _, l := range r.sub(c) {
				r.line(prefix + l)
				prefix = strings.Repeat(" ", len(mark))
			}
		}
	case *ast.Blockquote:
		for _, l := range r.sub(n) {
			r.line(barStyle.Render("▏ ") + italStyle.Render(l))
		}
	case *ast.ThematicBreak:
		r.line(barStyle.Render("────────"))
	case *east.Table:
		r.table(n)
	default:
		if n.HasChildren() {
			r.blocks(n)
		}
	}
}

// table writes a table as columns padded to their widest cell.
func (r *mdRenderer) table(t *east.Table) {
	var rows [][]string
	for row := t.FirstChild(); row != nil; row = row.NextSibling() {
		var cells []string
		for c := row.FirstChild(); c != nil; c = c.NextSibling() {
			cells = append(cells, r.inline(c))
		}
		rows = append(rows, cells)
	}
	widths := map[int]int{}
	for _, row := range rows {
		for i, c := range row {
			widths[i] = max(widths[i], lipgloss.Width(c))
		}
	}
	for ri, row := range rows {
		var b strings.Builder
		for i, c := range row {
			if i > 0 {
				b.WriteString(barStyle.Render(" │ "))
			}
			b.WriteString(c + strings.Repeat(" ", widths[i]-lipgloss.Width(c)))
		}
		l := b.String()
		if ri == 0 {
			l = boldStyle.Render(l)
		}
		r.line(l)
	}
}

// inline renders the inline children of n.
func (r *mdRenderer) inline(n ast.Node) string {
	var b strings.Builder
	for c := n.FirstChild(); c != nil; c = c.NextSibling() {
		switch c := c.(type) {
		case *ast.Text:
			b.WriteString(sanitize(string(c.Segment.Value(r.src))))
			if c.HardLineBreak() || c.SoftLineBreak() {
				b.WriteString("\n")
			}
		case *ast.String:
			b.WriteString(sanitize(string(c.Value)))
		case *ast.CodeSpan:
			b.WriteString(codeStyle.Render(r.plain(c)))
		case *ast.Emphasis:
			if c.Level >= 2 {
				b.WriteString(boldStyle.Render(r.inline(c)))
			} else {
				b.WriteString(italStyle.Render(r.inline(c)))
			}
		case *ast.Link:
			label := r.inline(c)
			url := sanitize(string(c.Destination))
			if label == url || label == "" {
				b.WriteString(linkStyle.Render(url))
			} else {
				b.WriteString(linkStyle.Render(label) + " (" + url + ")")
			}
		case *ast.AutoLink:
			b.WriteString(linkStyle.Render(sanitize(string(c.URL(r.src)))))
		case *ast.Image:
			b.WriteString("[image: " + r.inline(c) + "]")
		case *ast.RawHTML:
			segs := c.Segments
			for i := 0; i < segs.Len(); i++ {
				s := segs.At(i)
				b.WriteString(sanitize(string(s.Value(r.src))))
			}
		case *east.Strikethrough:
			b.WriteString("~" + r.inline(c) + "~")
		case *east.TaskCheckBox:
			if c.IsChecked {
				b.WriteString("[x] ")
			} else {
				b.WriteString("[ ] ")
			}
		default:
			b.WriteString(r.inline(c))
		}
	}
	return b.String()
}

// plain is the text of n without styles.
func (r *mdRenderer) plain(n ast.Node) string {
	var b strings.Builder
	for c := n.FirstChild(); c != nil; c = c.NextSibling() {
		if t, ok := c.(*ast.Text); ok {
			b.WriteString(sanitize(string(t.Segment.Value(r.src))))
		} else {
			b.WriteString(r.plain(c))
		}
	}
	return b.String()
}

// toolLines renders a run's tool calls, one per line, under its answer.
func toolLines(tools []wire.ToolUse) string {
	var b strings.Builder
	for _, u := range tools {
		out := "running…"
		switch u.Status {
		case "ok":
			out = toolOK.Render("ok")
		case "error":
			out = warnStyle.Render(strings.TrimSpace("error " + u.Code))
		case "waiting", "held:pending":
			out = warnStyle.Render("waiting for your approval")
		default:
			if w, ok := approvalWords[strings.TrimPrefix(u.Status, "held:")]; ok && strings.HasPrefix(u.Status, "held:") {
				out = w
			}
		}
		if u.Status != "running" && u.MS > 0 {
			out += dimStyle.Render(fmt.Sprintf(" %d ms", u.MS))
		}
		line := dimStyle.Render("⚙ ") + sanitize(u.Name)
		if u.Arg != "" {
			line += " " + dimStyle.Render(sanitize(u.Arg))
		}
		b.WriteString("\n" + line + " · " + out)
	}
	return b.String()
}
