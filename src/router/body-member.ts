/**
 * Adding a member to the client's body without writing the body again. Parsed and serialised
 * again, a seed past 2^53 would change, `1.0` in a tool's schema (rendered into the prompt)
 * become `1`, integer-like keys be reordered and `\u` escapes be decoded. So the client's text
 * (`ParsedBody.text`, decoded once) is kept and the member spliced in as the object's last one.
 * A member of the same name the client sent stays where it was: both engines read a repeated key
 * as its last value (vLLM: Python's json; llama.cpp: nlohmann::json, see `withLastMember`).
 */

/**
 * `text` (which JSON.parse read as the object `json`) with `"name":value` added as its last
 * member; `value` is JSON text. The last of a repeated key wins in JSON.parse, Python's json and
 * nlohmann::json (`json_sax_dom_parser::key` takes `object->operator[](key)`, the existing entry
 * for a repeated key, and the value then overwrites it: include/nlohmann/detail/input/json_sax.hpp
 * at v3.11.3; the same in v3.12.0, which llama.cpp vendors as vendor/nlohmann/json.hpp).
 */
export function withLastMember(
  json: Record<string, unknown>,
  text: string,
  name: string,
  value: string,
): string {
  // It parsed as an object: its last `}` closes it (only whitespace may follow).
  const end = text.lastIndexOf('}');
  const member = `${Object.keys(json).length > 0 ? ',' : ''}${JSON.stringify(name)}:${value}`;
  return text.slice(0, end) + member + text.slice(end);
}

/**
 * Whether the JSON `text` nests arrays and objects more than `limit` deep. `text` is valid JSON
 * (it parsed), so brackets outside strings are all structure.
 */
export function nestedDeeperThan(text: string, limit: number): boolean {
  // Each level takes an opening and a closing bracket.
  if (text.length <= 2 * limit) return false;
  let depth = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x22 /* " */) {
      // Skip the string; a backslash escapes the character after it.
      for (i++; i < text.length; i++) {
        const s = text.charCodeAt(i);
        if (s === 0x5c /* \ */) i++;
        else if (s === 0x22) break;
      }
    } else if (c === 0x5b /* [ */ || c === 0x7b /* { */) {
      if (++depth > limit) return true;
    } else if (c === 0x5d /* ] */ || c === 0x7d /* } */) {
      depth--;
    }
  }
  return false;
}
