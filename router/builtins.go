package router

import (
	"strconv"
	"strings"
)

// render produces the exact bytes bash's echo or printf builtin writes for
// args, for the subset the router accepts; the runner writes them and runs no
// program.
func render(name string, args []string) (string, *refusal) {
	if name == "echo" {
		return renderEcho(args)
	}
	return renderPrintf(args)
}

// renderEcho follows bash's echo with xpg_echo off: leading words made only of
// -n, -e and -E letters are options; "--" is not special.
func renderEcho(args []string) (string, *refusal) {
	newline, escapes := true, false
	i := 0
	for ; i < len(args); i++ {
		a := args[i]
		if len(a) < 2 || a[0] != '-' || strings.Trim(a[1:], "neE") != "" {
			break
		}
		for _, c := range a[1:] {
			switch c {
			case 'n':
				newline = false
			case 'e':
				escapes = true
			case 'E':
				escapes = false
			}
		}
	}
	rest := args[i:]
	if escapes {
		for _, a := range rest {
			if strings.ContainsRune(a, '\\') {
				return "", refuse("echo -e escapes are not interpreted on the host")
			}
		}
	}
	out := strings.Join(rest, " ")
	if newline {
		out += "\n"
	}
	return out, nil
}

// renderPrintf supports a format with %s, %d, %% and the escapes \n, \t, \\;
// anything else (widths, %b, %q, -v, other escapes) is refused. Like bash it
// reuses the format while arguments remain, and supplies "" or 0 for missing
// ones.
func renderPrintf(args []string) (string, *refusal) {
	if len(args) == 0 {
		return "", refuse("printf needs a format")
	}
	format, rest := args[0], args[1:]
	if strings.HasPrefix(format, "-") {
		return "", refuse("printf options are never run on the host")
	}
	var b strings.Builder
	for {
		consumed := 0
		for i := 0; i < len(format); i++ {
			c := format[i]
			switch c {
			case '\\':
				if i+1 >= len(format) {
					return "", refuse("printf format ends in a backslash")
				}
				i++
				switch format[i] {
				case 'n':
					b.WriteByte('\n')
				case 't':
					b.WriteByte('\t')
				case '\\':
					b.WriteByte('\\')
				default:
					return "", refuse("printf escape %s is not supported on the host", quote(format[i-1:i+1]))
				}
			case '%':
				if i+1 >= len(format) {
					return "", refuse("printf format ends in %%")
				}
				i++
				switch format[i] {
				case '%':
					b.WriteByte('%')
				case 's', 'd':
					arg := ""
					if len(rest) > 0 {
						arg, rest = rest[0], rest[1:]
					}
					consumed++
					if format[i] == 's' {
						b.WriteString(arg)
						break
					}
					n, ok := printfInt(arg)
					if !ok {
						return "", refuse("printf %%d argument %s is not a plain decimal number", quote(arg))
					}
					b.WriteString(n)
				default:
					return "", refuse("printf directive %s is not supported on the host; only %%s, %%d and %%%% are", quote(format[i-1:i+1]))
				}
			default:
				b.WriteByte(c)
			}
		}
		if consumed == 0 || len(rest) == 0 {
			return b.String(), nil
		}
	}
}

// printfInt accepts what bash prints unchanged: "", 0 and decimals without a
// leading zero (bash reads 010 as octal and 0x10 as hex).
func printfInt(s string) (string, bool) {
	if s == "" {
		return "0", true
	}
	d := strings.TrimPrefix(s, "-")
	if !isDigits(d) || (len(d) > 1 && d[0] == '0') || len(d) > 18 {
		return "", false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return "", false
	}
	return strconv.FormatInt(n, 10), true
}
