package logging

import (
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

// EncodeEntry adds the fields through the wrapper, escapes the entry's own
// strings, encodes, and escapes what is left in the encoded bytes.
func (e cleanEncoder) EncodeEntry(ent zapcore.Entry, fields []zapcore.Field) (*buffer.Buffer, error) {
	c := e.Encoder.Clone()
	wrapped := cleanEncoder{Encoder: c, clean: e.clean}
	for _, f := range fields {
		f.AddTo(wrapped)
	}
	ent.Message = e.clean(ent.Message)
	ent.LoggerName = e.clean(ent.LoggerName)
	ent.Stack = sanitize.Text(ent.Stack)
	buf, err := c.EncodeEntry(ent, nil)
	if err != nil {
		return nil, err
	}
	escapeEncoded(buf)
	return buf, nil
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
