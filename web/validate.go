package web

import (
	"reflect"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/switchboard/switchboard/services"
)

// checkText refuses a NUL character or invalid UTF-8 in a text field (PostgreSQL text
// cannot hold NUL; stored text is UTF-8), naming the field.
func checkText(field, v string) error {
	return checkTextAs("field "+strconv.Quote(field), v)
}

// checkTextAs is checkText for what label names (a parameter, a key).
func checkTextAs(name, v string) error {
	if i := strings.IndexByte(v, 0); i >= 0 {
		return services.Errorf(services.EINVALID, "%s contains a NUL character (\\u0000) at byte %d; remove it", name, i)
	}
	if !utf8.ValidString(v) {
		return services.Errorf(services.EINVALID, "%s is not valid UTF-8", name)
	}
	return nil
}

// checkTextFields runs checkText on every string a decoded request holds
// (struct fields by their JSON names, slice elements, map keys and values),
// so a new text field of the API is covered without a line of its own.
func checkTextFields(v any) error {
	return walkText(reflect.ValueOf(v), "")
}

func walkText(v reflect.Value, path string) error {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return nil
		}
		return walkText(v.Elem(), path)
	case reflect.String:
		return checkText(path, v.String())
	case reflect.Struct:
		t := v.Type()
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "-" {
				continue
			}
			if name == "" {
				name = f.Name
			}
			if err := walkText(v.Field(i), join(path, name)); err != nil {
				return err
			}
		}
	case reflect.Slice, reflect.Array:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return nil // raw JSON or bytes: checked where decoded
		}
		for i := 0; i < v.Len(); i++ {
			if err := walkText(v.Index(i), path+"["+strconv.Itoa(i)+"]"); err != nil {
				return err
			}
		}
	case reflect.Map:
		it := v.MapRange()
		for it.Next() {
			k := it.Key()
			if k.Kind() == reflect.String {
				if err := checkTextAs("a key of field "+strconv.Quote(path), k.String()); err != nil {
					return err
				}
			}
			if err := walkText(it.Value(), join(path, k.String())); err != nil {
				return err
			}
		}
	}
	return nil
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

// checkParams refuses a request whose query or path parameters hold a NUL
// character or invalid UTF-8 (400 naming the parameter), before any
// handler passes them to the database.
func checkParams(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		for name, vals := range c.QueryParams() {
			for _, v := range vals {
				if err := checkTextAs("query parameter "+strconv.Quote(name), v); err != nil {
					return err
				}
			}
		}
		for i, name := range c.ParamNames() {
			if vals := c.ParamValues(); i < len(vals) {
				if err := checkTextAs("path parameter "+strconv.Quote(name), vals[i]); err != nil {
					return err
				}
			}
		}
		return next(c)
	}
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
