package main

import (
	"errors"
	"fmt"

	"github.com/cockroachdb/apd/v3"
)

// Bounds of one expression. They keep the work of a call small whatever the
// model sends: the length bounds the parse, the depth the recursion, the
// digits and the exponent bound the size of every intermediate number.
const (
	// MaxExpressionBytes bounds the expression text.
	MaxExpressionBytes = 1000
	// MaxDepth bounds nested parentheses, unary signs and powers.
	MaxDepth = 64
	// MaxNumberDigits bounds the digits of one literal.
	MaxNumberDigits = 100
	// MaxPower bounds the absolute value of an integer exponent of ^.
	MaxPower = 9999
	// Precision is the significant decimal digits of every result
	// (decimal128's 34); results are rounded half-even to it.
	Precision = 34
	// MaxExponent bounds the adjusted exponent of every value: beyond
	// it an expression overflows rather than grows without bound.
	MaxExponent = 6144
)

// EvalError is a problem with the expression itself: a malformed
// expression (with the byte offset where it was found) or an arithmetic
// failure such as division by zero. The tool reports it as its output,
// so the model can read it and correct the expression.
type EvalError struct {
	Msg string
	// Pos is the 0-based byte offset in the expression the error points
	// at, or -1 when it concerns the whole expression (overflow).
	Pos int
}

func (e *EvalError) Error() string {
	if e.Pos < 0 {
		return e.Msg
	}
	return fmt.Sprintf("%s at position %d", e.Msg, e.Pos)
}

var baseContext = apd.Context{
	Precision:   Precision,
	MaxExponent: MaxExponent,
	MinExponent: -MaxExponent,
	Rounding:    apd.RoundHalfEven,
	// Every exceptional condition stops the evaluation: nothing inexact
	// beyond rounding to Precision is ever reported as a result.
	Traps: apd.Overflow | apd.Underflow | apd.Subnormal | apd.DivisionByZero |
		apd.DivisionImpossible | apd.DivisionUndefined | apd.InvalidOperation | apd.SystemOverflow | apd.SystemUnderflow,
}

// Evaluate computes an arithmetic expression exactly in decimal: numbers
// (123, 0.1, 1e-3), + - * /, ^ with an integer exponent (right
// associative, binding tighter than unary minus: -2^2 is -4), unary minus
// and plus, and parentheses. The result is rounded to Precision
// significant digits and written without exponent when that is short
// (0.3, 1000, -0.000125), in scientific notation otherwise.
func Evaluate(expr string) (string, error) {
	if len(expr) > MaxExpressionBytes {
		return "", &EvalError{Msg: fmt.Sprintf("expression longer than %d bytes", MaxExpressionBytes), Pos: -1}
	}
	p := &parser{src: expr, ctx: baseContext}
	p.skipSpace()
	if p.pos == len(p.src) {
		return "", &EvalError{Msg: "empty expression", Pos: 0}
	}
	v, err := p.expr(0)
	if err != nil {
		return "", err
	}
	if p.pos != len(p.src) {
		return "", p.errorf("unexpected %s", p.describe())
	}
	return format(v), nil
}

// format writes v in its shortest exact form: trailing zeros dropped,
// plain notation for moderate exponents.
func format(v *apd.Decimal) string {
	var r apd.Decimal
	r.Reduce(v)
	if r.IsZero() {
		return "0"
	}
	if adj := r.NumDigits() + int64(r.Exponent) - 1; adj >= -20 && adj < 40 {
		return r.Text('f')
	}
	return r.Text('E')
}

type parser struct {
	src string
	pos int
	ctx apd.Context
}

func (p *parser) errorf(format string, args ...any) error {
	return &EvalError{Msg: fmt.Sprintf(format, args...), Pos: p.pos}
}

func (p *parser) describe() string {
	if p.pos >= len(p.src) {
		return "end of expression"
	}
	return fmt.Sprintf("%q", p.src[p.pos])
}

func (p *parser) skipSpace() {
	for p.pos < len(p.src) {
		switch p.src[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

// peek returns the next non-space byte, or 0 at the end.
func (p *parser) peek() byte {
	p.skipSpace()
	if p.pos >= len(p.src) {
		return 0
	}
	return p.src[p.pos]
}

// expr := term (("+" | "-") term)*
func (p *parser) expr(depth int) (*apd.Decimal, error) {
	left, err := p.term(depth)
	if err != nil {
		return nil, err
	}
	for {
		op := p.peek()
		if op != '+' && op != '-' {
			return left, nil
		}
		at := p.pos
		p.pos++
		right, err := p.term(depth)
		if err != nil {
			return nil, err
		}
		res := new(apd.Decimal)
		var c apd.Condition
		if op == '+' {
			c, err = p.ctx.Add(res, left, right)
		} else {
			c, err = p.ctx.Sub(res, left, right)
		}
		if err != nil {
			return nil, arithError(c, at)
		}
		left = res
	}
}

// term := unary (("*" | "/") unary)*
func (p *parser) term(depth int) (*apd.Decimal, error) {
	left, err := p.unary(depth)
	if err != nil {
		return nil, err
	}
	for {
		op := p.peek()
		if op != '*' && op != '/' {
			return left, nil
		}
		at := p.pos
		p.pos++
		right, err := p.unary(depth)
		if err != nil {
			return nil, err
		}
		res := new(apd.Decimal)
		var c apd.Condition
		if op == '*' {
			c, err = p.ctx.Mul(res, left, right)
		} else {
			if right.IsZero() {
				return nil, &EvalError{Msg: "division by zero", Pos: at}
			}
			c, err = p.ctx.Quo(res, left, right)
		}
		if err != nil {
			return nil, arithError(c, at)
		}
		left = res
	}
}

// unary := ("-" | "+") unary | power
func (p *parser) unary(depth int) (*apd.Decimal, error) {
	if depth >= MaxDepth {
		return nil, p.errorf("expression nested deeper than %d", MaxDepth)
	}
	switch p.peek() {
	case '-':
		p.pos++
		v, err := p.unary(depth + 1)
		if err != nil {
			return nil, err
		}
		return new(apd.Decimal).Neg(v), nil
	case '+':
		p.pos++
		return p.unary(depth + 1)
	}
	return p.power(depth)
}

// power := primary ("^" unary)?   (right associative through unary)
func (p *parser) power(depth int) (*apd.Decimal, error) {
	base, err := p.primary(depth)
	if err != nil {
		return nil, err
	}
	if p.peek() != '^' {
		return base, nil
	}
	at := p.pos
	p.pos++
	expStart := p.pos
	exp, err := p.unary(depth + 1)
	if err != nil {
		return nil, err
	}
	n, err := integerPower(exp)
	if err != nil {
		p.skipSpace()
		return nil, &EvalError{Msg: err.Error(), Pos: max(expStart, at+1)}
	}
	if base.IsZero() && n < 0 {
		return nil, &EvalError{Msg: "division by zero (zero to a negative power)", Pos: at}
	}
	res := new(apd.Decimal)
	if c, err := p.ctx.Pow(res, base, apd.New(n, 0)); err != nil {
		return nil, arithError(c, at)
	}
	return res, nil
}

// integerPower returns exp as an integer within ±MaxPower.
func integerPower(exp *apd.Decimal) (int64, error) {
	var r apd.Decimal
	r.Reduce(exp)
	if r.Exponent < 0 {
		return 0, errors.New("exponent must be an integer")
	}
	if r.NumDigits()+int64(r.Exponent) > 5 {
		return 0, fmt.Errorf("exponent outside -%d..%d", MaxPower, MaxPower)
	}
	n, err := r.Int64()
	if err != nil || n > MaxPower || n < -MaxPower {
		return 0, fmt.Errorf("exponent outside -%d..%d", MaxPower, MaxPower)
	}
	return n, nil
}

// primary := number | "(" expr ")"
func (p *parser) primary(depth int) (*apd.Decimal, error) {
	switch c := p.peek(); {
	case c == '(':
		open := p.pos
		p.pos++
		v, err := p.expr(depth + 1)
		if err != nil {
			return nil, err
		}
		if p.peek() != ')' {
			if p.pos >= len(p.src) {
				return nil, &EvalError{Msg: "unclosed parenthesis", Pos: open}
			}
			return nil, p.errorf("expected ')' but found %s", p.describe())
		}
		p.pos++
		return v, nil
	case c >= '0' && c <= '9' || c == '.':
		return p.number()
	}
	if p.pos >= len(p.src) {
		return nil, p.errorf("expected a number or '(' but the expression ended")
	}
	return nil, p.errorf("expected a number or '(' but found %s", p.describe())
}

// number := digits ["." digits] [("e" | "E") ["+" | "-"] digits], with at
// least one digit before or after the point.
func (p *parser) number() (*apd.Decimal, error) {
	start := p.pos
	digits := 0
	scan := func() {
		for p.pos < len(p.src) && p.src[p.pos] >= '0' && p.src[p.pos] <= '9' {
			p.pos++
			digits++
		}
	}
	scan()
	if p.pos < len(p.src) && p.src[p.pos] == '.' {
		p.pos++
		scan()
	}
	if digits == 0 {
		return nil, &EvalError{Msg: "malformed number", Pos: start}
	}
	if digits > MaxNumberDigits {
		return nil, &EvalError{Msg: fmt.Sprintf("number with more than %d digits", MaxNumberDigits), Pos: start}
	}
	if p.pos < len(p.src) && (p.src[p.pos] == 'e' || p.src[p.pos] == 'E') {
		p.pos++
		if p.pos < len(p.src) && (p.src[p.pos] == '+' || p.src[p.pos] == '-') {
			p.pos++
		}
		expDigits := p.pos
		for p.pos < len(p.src) && p.src[p.pos] >= '0' && p.src[p.pos] <= '9' {
			p.pos++
		}
		if p.pos == expDigits {
			return nil, &EvalError{Msg: "malformed number exponent", Pos: start}
		}
		if p.pos-expDigits > 4 {
			return nil, &EvalError{Msg: fmt.Sprintf("number exponent outside -%d..%d", MaxExponent, MaxExponent), Pos: start}
		}
	}
	v, _, err := apd.NewFromString(p.src[start:p.pos])
	if err != nil {
		return nil, &EvalError{Msg: "malformed number", Pos: start}
	}
	// Round the literal to the working precision, and check its exponent
	// against the context's bounds.
	res := new(apd.Decimal)
	if c, err := p.ctx.Round(res, v); err != nil {
		return nil, arithError(c, start)
	}
	return res, nil
}

// arithError turns a trapped condition into an EvalError.
func arithError(c apd.Condition, pos int) error {
	msg := "arithmetic error"
	{
		switch {
		case c&apd.DivisionByZero != 0:
			msg = "division by zero"
		case c&(apd.Overflow|apd.SystemOverflow) != 0:
			msg = fmt.Sprintf("result too large (magnitude beyond 1e%d)", MaxExponent)
		case c&(apd.Underflow|apd.Subnormal|apd.SystemUnderflow) != 0:
			msg = fmt.Sprintf("result too small (magnitude below 1e-%d)", MaxExponent)
		case c&(apd.DivisionUndefined|apd.InvalidOperation|apd.DivisionImpossible) != 0:
			msg = "undefined result"
		}
	}
	return &EvalError{Msg: msg, Pos: pos}
}
