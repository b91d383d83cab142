// The filter language of the contract (section 4) as an editable tree, and back.
// JSON: {"col": value} | {"col": {"op": value, ...}} | {"and": [...]} | {"or": [...]} | {"not": {...}};
// several keys in one object mean "and". The tree is what the filter builder edits.

export const OPS = ['eq', 'ne', 'lt', 'lte', 'gt', 'gte', 'in', 'nin', 'like', 'is_null'] as const;
export type Op = (typeof OPS)[number];

export type FilterJson = Record<string, unknown>;

export interface Condition {
  kind: 'cond';
  column: string;
  op: Op;
  value: unknown;
}

export interface Group {
  kind: 'group';
  combinator: 'and' | 'or';
  negate: boolean;
  children: FilterNode[];
}

export type FilterNode = Condition | Group;

export function emptyGroup(combinator: 'and' | 'or' = 'and'): Group {
  return { kind: 'group', combinator, negate: false, children: [] };
}

export function condition(column: string, op: Op = 'eq', value: unknown = ''): Condition {
  return { kind: 'cond', column, op, value };
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function isOp(key: string): key is Op {
  return (OPS as readonly string[]).includes(key);
}

/** A value is an operator map when every key is an operator (a `$principal` reference is a value). */
function isOpMap(value: unknown): value is Record<Op, unknown> {
  return isObject(value) && Object.keys(value).length > 0 && Object.keys(value).every(isOp);
}

/** One JSON filter → the tree the builder edits. Throws on a shape the language does not have. */
export function fromJson(json: unknown): Group {
  if (json === null || json === undefined) return emptyGroup();
  if (!isObject(json)) throw new Error('a filter is a JSON object');
  const node = nodeFromJson(json);
  return node.kind === 'group' ? node : { ...emptyGroup(), children: [node] };
}

function nodeFromJson(json: Record<string, unknown>): FilterNode {
  const keys = Object.keys(json);
  if (keys.length === 1 && (keys[0] === 'and' || keys[0] === 'or')) {
    const list = json[keys[0]];
    if (!Array.isArray(list)) throw new Error(`"${keys[0]}" takes a list of filters`);
    return {
      kind: 'group', combinator: keys[0], negate: false,
      children: list.map((item) => {
        if (!isObject(item)) throw new Error('each filter in a list is a JSON object');
        return nodeFromJson(item);
      }),
    };
  }
  if (keys.length === 1 && keys[0] === 'not') {
    const inner = json.not;
    if (!isObject(inner)) throw new Error('"not" takes one filter');
    const node = nodeFromJson(inner);
    const group: Group = node.kind === 'group' ? node : { ...emptyGroup(), children: [node] };
    return { ...group, negate: !group.negate };
  }
  const children: FilterNode[] = [];
  for (const key of keys) {
    if (key === 'and' || key === 'or' || key === 'not') {
      children.push(nodeFromJson({ [key]: json[key] }));
      continue;
    }
    const value = json[key];
    if (isOpMap(value)) {
      for (const [op, operand] of Object.entries(value)) children.push(condition(key, op as Op, operand));
    } else {
      children.push(condition(key, 'eq', value));
    }
  }
  return children.length === 1 ? children[0] : { ...emptyGroup(), children };
}

/** The tree → the JSON the API takes, or null when the tree holds no condition. */
export function toJson(node: FilterNode): FilterJson | null {
  if (node.kind === 'cond') {
    if (!node.column) return null;
    return { [node.column]: { [node.op]: node.value } };
  }
  const parts = node.children.map(toJson).filter((part): part is FilterJson => part !== null);
  if (parts.length === 0) return null;
  const body: FilterJson = parts.length === 1 ? parts[0] : { [node.combinator]: parts };
  return node.negate ? { not: body } : body;
}

/** Reads what an operator typed in a value box, as the operator needs it. */
export function parseInput(text: string, op: Op, type = 'text'): unknown {
  if (op === 'is_null') return text !== 'false';
  if (op === 'in' || op === 'nin') {
    return text.split(',').map((part) => part.trim()).filter((part) => part !== '')
      .map((part) => parseScalar(part, type));
  }
  return parseScalar(text, type);
}

function parseScalar(text: string, type: string): unknown {
  if (type === 'integer' && /^-?\d+$/.test(text)) return Number(text);
  if (type === 'boolean' && (text === 'true' || text === 'false')) return text === 'true';
  return text;
}

/** What the value box shows for a stored value (the inverse of parseInput). */
export function formatInput(value: unknown): string {
  if (Array.isArray(value)) return value.map(String).join(', ');
  if (value === null || value === undefined) return '';
  if (isObject(value)) return JSON.stringify(value);
  return String(value);
}

export type PrincipalAttr = 'uid' | 'email' | 'org';

export function principalOf(value: unknown): PrincipalAttr | null {
  if (isObject(value) && Object.keys(value).length === 1 && typeof value.$principal === 'string') {
    return value.$principal as PrincipalAttr;
  }
  return null;
}
