package markdown

import (
	"strconv"

	"github.com/switchboard/switchboard/services"
)

// ResolvedPin is a pin with the text it includes.
type ResolvedPin struct {
	Pin services.Pin
	// Title names the pin and the lines it took ("notes.md#Goals, lines 3-7").
	Title string
	Text  string
}

// ResolvePin reads what a pin includes through readFile: the whole file,
// its Markdown section or its lines (clamped to the end of the file).
// Errors: ENOTFOUND for a missing file or section, EINVALID for lines past
// the end of the file.
func ResolvePin(p services.Pin, readFile func(path string) ([]byte, error)) (ResolvedPin, error) {
	if err := p.Validate(); err != nil {
		return ResolvedPin{}, err
	}
	readFile = notFoundAs(readFile)
	if p.Block == "" && len(p.Lines) == 0 {
		data, err := readFile(p.Path)
		if err != nil {
			return ResolvedPin{}, err
		}
		return ResolvedPin{Pin: p, Title: p.Path, Text: string(data)}, nil
	}
	ref := Ref{Path: p.Path, HeadingPath: p.Block}
	if len(p.Lines) == 2 {
		ref.StartLine, ref.EndLine = p.Lines[0], p.Lines[1]
	}
	res, err := Resolve(ref, readFile)
	if err != nil {
		return ResolvedPin{}, err
	}
	title := p.String()
	if p.Block != "" {
		title += ", lines " + strconv.Itoa(res.StartLine) + "-" + strconv.Itoa(res.EndLine)
	} else if res.Clamped {
		title = p.Path + ":" + strconv.Itoa(res.StartLine) + "-" + strconv.Itoa(res.EndLine) + " (the file ends there)"
	}
	return ResolvedPin{Pin: p, Title: title, Text: res.Text}, nil
}

// notFoundAs words a missing file the same way for every reader: "file
// PATH not found".
func notFoundAs(readFile func(path string) ([]byte, error)) func(path string) ([]byte, error) {
	return func(path string) ([]byte, error) {
		data, err := readFile(path)
		if services.IsKind(err, services.ENOTFOUND) {
			return nil, &services.Error{Kind: services.ENOTFOUND, Message: "file " + path + " not found", Err: err}
		}
		return data, err
	}
}
