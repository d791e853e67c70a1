package openai

import (
	"reflect"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/switchboard/switchboard/services"
)

// checkText refuses a text field holding a NUL character (the request is
// stored with its message) or invalid UTF-8.
func checkText(field, v string) error {
	name := "field " + strconv.Quote(field)
	if i := strings.IndexByte(v, 0); i >= 0 {
		return services.Errorf(services.EINVALID, "%s contains a NUL character (\\u0000) at byte %d; remove it", name, i)
	}
	if !utf8.ValidString(v) {
		return services.Errorf(services.EINVALID, "%s is not valid UTF-8", name)
	}
	return nil
}

// invalidUTF8At is the offset of the first invalid UTF-8 sequence in b.
func invalidUTF8At(b []byte) int {
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n <= 1 {
			return i
		}
		i += n
	}
	return len(b)
}

// jsonKind names a Go type as the JSON a client should send.
func jsonKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Struct, reflect.Map:
		return "an object"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int64, reflect.Float64:
		return "a number"
	}
	return t.String()
}
