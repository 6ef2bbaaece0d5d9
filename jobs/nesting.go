package jobs

// nestingDepth is how deeply arrays and objects nest in the JSON text raw
// ([] is 1, [[]] is 2, a scalar 0), counted in one pass; it stops counting
// past limit+1, which is all the caller needs to know.
func nestingDepth(raw string, limit int) int {
	depth, deepest := 0, 0
	inString := false
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		switch {
		case inString:
			if c == '\\' {
				i++
			} else if c == '"' {
				inString = false
			}
		case c == '"':
			inString = true
		case c == '[' || c == '{':
			depth++
			if depth > deepest {
				deepest = depth
				if deepest > limit {
					return deepest
				}
			}
		case c == ']' || c == '}':
			depth--
		}
	}
	return deepest
}

// checkNesting refuses a value nested deeper than MaxNesting, less the
// levels above it inside the field the template receives.
func checkNesting(param, raw string, above int) *fieldError {
	if limit := MaxNesting - above; nestingDepth(raw, limit) > limit {
		return fieldErrorf(param, codeInvalidValue,
			"field %q is nested more than %d levels deep (arrays and objects within each other)", param, limit)
	}
	return nil
}
