package logging

import (
	"slices"
	"unicode/utf8"

	"go.uber.org/zap/buffer"
	"go.uber.org/zap/zapcore"

	"github.com/anarchon/anarchon/internal/sanitize"
)

// cleanEncoder wraps the console or JSON encoder so that nothing it writes
// can drive a terminal (see internal/sanitize). The message and every string
// field (errors and Stringers included) are escaped to visible text before
// they are encoded: with sanitize.Line on the console, whose entries must
// stay on their line, with sanitize.Text in JSON, which escapes line feeds
// and tabs itself. Whatever else still carries a control, bidirectional or
// format character (a reflected value, an object, a key) has it replaced by
// its JSON escape in the encoded entry, which stays valid JSON.
type cleanEncoder struct {
	zapcore.Encoder
	clean func(string) string
}

func newCleanEncoder(enc zapcore.Encoder, clean func(string) string) zapcore.Encoder {
	return cleanEncoder{Encoder: enc, clean: clean}
}

// Clone keeps the wrapping for the fields of With.
func (e cleanEncoder) Clone() zapcore.Encoder {
	return cleanEncoder{Encoder: e.Encoder.Clone(), clean: e.clean}
}

// AddString escapes the value; zap adds errors and Stringers through it.
func (e cleanEncoder) AddString(key, value string) {
	e.Encoder.AddString(key, e.clean(value))
}

// AddByteString escapes the value as text.
func (e cleanEncoder) AddByteString(key string, value []byte) {
	e.Encoder.AddString(key, e.clean(string(value)))
}

// EncodeEntry escapes the entry's own strings and its fields' (cleanFields),
// encodes, and escapes what is left in the encoded bytes.
func (e cleanEncoder) EncodeEntry(ent zapcore.Entry, fields []zapcore.Field) (*buffer.Buffer, error) {
	ent.Message = e.clean(ent.Message)
	ent.LoggerName = e.clean(ent.LoggerName)
	ent.Stack = sanitize.Text(ent.Stack)
	buf, err := e.Encoder.EncodeEntry(ent, e.cleanFields(fields))
	if err != nil {
		return nil, err
	}
	escapeEncoded(buf)
	return buf, nil
}

// cleanFields returns fields with every string a field adds escaped, as
// when the fields are added through the wrapper (With): a string's value
// directly, byte strings as text, errors and Stringers through an inline
// field that adds them through the wrapper. The wrapped encoder's
// EncodeEntry encodes them; the fields are not added to a clone of it first,
// which would cost a second clone and buffer per entry. fields itself is
// left as it is (the caller may reuse it).
func (e cleanEncoder) cleanFields(fields []zapcore.Field) []zapcore.Field {
	var out []zapcore.Field
	for i, f := range fields {
		switch f.Type {
		case zapcore.StringType:
			if c := e.clean(f.String); c != f.String {
				f.String = c
			} else {
				continue
			}
		case zapcore.ByteStringType:
			f = zapcore.Field{Key: f.Key, Type: zapcore.StringType, String: e.clean(string(f.Interface.([]byte)))}
		case zapcore.ErrorType, zapcore.StringerType:
			f = zapcore.Field{Key: f.Key, Type: zapcore.InlineMarshalerType, Interface: cleanAdd{f, e.clean}}
		default:
			continue
		}
		if out == nil {
			out = slices.Clone(fields)
		}
		out[i] = f
	}
	if out == nil {
		return fields
	}
	return out
}

// cleanAdd adds a field through a wrapper that escapes its strings: zap
// adds an error's message (and its verbose form) and a Stringer's string
// with AddString.
type cleanAdd struct {
	f     zapcore.Field
	clean func(string) string
}

// MarshalLogObject adds the field, inline, to enc.
func (a cleanAdd) MarshalLogObject(enc zapcore.ObjectEncoder) error {
	a.f.AddTo(cleanObject{ObjectEncoder: enc, clean: a.clean})
	return nil
}

// cleanObject escapes the strings added to an ObjectEncoder, as
// cleanEncoder does.
type cleanObject struct {
	zapcore.ObjectEncoder
	clean func(string) string
}

// AddString escapes the value.
func (o cleanObject) AddString(key, value string) { o.ObjectEncoder.AddString(key, o.clean(value)) }

// AddByteString escapes the value as text.
func (o cleanObject) AddByteString(key string, value []byte) {
	o.ObjectEncoder.AddString(key, o.clean(string(value)))
}

// escapeEncoded replaces, in an encoded entry, each DEL, C1, format or
// separator character with its JSON escape (\u009b, a surrogate pair beyond
// the BMP) and invalid UTF-8 with U+FFFD. C0 controls are left: both
// encoders escape them inside values and use tabs and the final line feed
// as separators.
func escapeEncoded(buf *buffer.Buffer) {
	b := buf.Bytes()
	i := 0
	for i < len(b) && b[i] < 0x7f {
		i++
	}
	if i == len(b) {
		return
	}
	out := append(make([]byte, 0, len(b)+16), b[:i]...)
	for i < len(b) {
		r, size := utf8.DecodeRune(b[i:])
		switch {
		case r == utf8.RuneError && size <= 1:
			out = utf8.AppendRune(out, utf8.RuneError)
		case r >= 0x7f && sanitize.Unsafe(r):
			out = appendJSONEscape(out, r)
		default:
			out = append(out, b[i:i+size]...)
		}
		i += size
	}
	buf.Reset()
	_, _ = buf.Write(out)
}

// appendJSONEscape appends r as \uHHHH, or as a UTF-16 surrogate pair.
func appendJSONEscape(out []byte, r rune) []byte {
	const hex = "0123456789abcdef"
	u16 := func(v rune) {
		out = append(out, '\\', 'u', hex[v>>12&0xf], hex[v>>8&0xf], hex[v>>4&0xf], hex[v&0xf])
	}
	if r > 0xffff {
		r -= 0x10000
		u16(0xd800 + r>>10)
		u16(0xdc00 + r&0x3ff)
		return out
	}
	u16(r)
	return out
}
