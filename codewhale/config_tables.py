"""Config tables: typed, frozen values checked strictly as they are built.

A table is a class whose annotated attributes are its keys, each with its default as
the class attribute (a table-typed key defaults to that table's defaults). Building
one, from keywords or from a TOML table (`Table.validate`), checks every value the
way the config promises: an integer is not a bool, a string is not a number, a list
holds what it says, unknown keys are refused; a number outside its `Bounds` is
clamped with a note; then the table's own rules run. Every problem found is raised
at once in a TableError, each with where it is (`loc`, from the table the check
started at), a type code and a message (config.py words them for the user).

Hand-written because the check runs before the first frame of every start whose
config changed: pydantic and its models of these tables cost ~100 ms of CPU there
(the import and the schema build), this module ~1 ms.
"""

from __future__ import annotations

import types
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar, Literal, Union, get_args, get_origin, get_type_hints

# The notes of the check under way: (the keys that caused an adjustment, the message).
Notes = list[tuple[tuple[str, ...], str]]
_NOTES: ContextVar[Notes | None] = ContextVar("config_notes", default=None)


@dataclass(frozen=True)
class Bounds:
    """Inclusive range a number is clamped into."""

    low: float
    high: float


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a value: where, what kind (pydantic's codes), and why."""

    loc: tuple[str | int, ...]
    type: str
    msg: str

    def under(self, *prefix: str | int) -> Problem:
        return Problem((*prefix, *self.loc), self.type, self.msg)


class TableError(ValueError):
    """Every problem found while building a table."""

    def __init__(self, problems: list[Problem]) -> None:
        super().__init__("; ".join(problem.msg for problem in problems))
        self.problems = problems


def note(keys: tuple[str, ...], message: str) -> None:
    """Record an adjustment; `keys` are the settings that caused it, most direct first."""
    notes = _NOTES.get()
    if notes is not None:
        notes.append((keys, message))


def rule(*names: str, before: bool = False) -> Callable[[Callable[..., Any]], Any]:
    """Mark a function `value -> value` as a check of the keys `names`, run after their
    type check (`before`: on the raw value, ahead of it, for a key that takes more than
    one type); a ValueError it raises is the key's problem."""

    def mark(function: Callable[..., Any]) -> Any:
        function.__config_rule__ = (names, before)  # type: ignore[attr-defined]
        return staticmethod(function)

    return mark


class Table:
    """A config table; see the module's docstring."""

    section: ClassVar[str] = ""  # the dotted name notes use ("" for the top level)
    hidden: ClassVar[frozenset[str]] = frozenset()  # keys repr leaves out (secrets)
    _keys: ClassVar[dict[str, _Key]]

    def __init__(self, **values: Any) -> None:
        keys = self._schema()
        problems: list[Problem] = []
        try:
            values = self._clamped(self._before(values))
        except ValueError as error:
            raise _broken_rule(error) from None
        for name, key in keys.items():
            try:
                value = key.check(values[name]) if name in values else key.default()
            except TableError as error:
                problems += [problem.under(name) for problem in error.problems]
                continue
            object.__setattr__(self, name, value)
        problems += [
            Problem((name,), "extra_forbidden", "Extra inputs are not permitted")
            for name in values
            if name not in keys
        ]
        if problems:
            raise TableError(problems)
        try:
            self._after()
        except ValueError as error:
            raise _broken_rule(error) from None

    @classmethod
    def validate(cls, data: Any, notes: Notes | None = None) -> Any:
        """A table built from a TOML table; TableError lists what is wrong, adjustments
        go to `notes`."""
        token = _NOTES.set(notes)
        try:
            return cls._from_value(data)
        finally:
            _NOTES.reset(token)

    @classmethod
    def _from_value(cls, value: Any) -> Any:
        if isinstance(value, cls):
            return value
        if not isinstance(value, dict):
            raise TableError(
                [
                    Problem(
                        (),
                        "model_type",
                        f"Input should be a valid dictionary or instance of {cls.__name__}",
                    )
                ]
            )
        return cls(**value)

    @classmethod
    def keys(cls) -> dict[str, Any]:
        """Each key and its type: a Table subclass for a nested table."""
        return {name: key.table or key.hint for name, key in cls._schema().items()}

    @classmethod
    def default_of(cls, name: str) -> Any:
        return cls._schema()[name].default()

    def replace(self, **update: Any) -> Any:
        """A copy with `update` applied, checked again."""
        return type(self)(**{**self._values(), **update})

    def to_dict(self) -> dict[str, Any]:
        """The table as plain nested data."""
        return {name: _plain(value) for name, value in self._values().items()}

    @classmethod
    def _before(cls, values: dict[str, Any]) -> dict[str, Any]:
        """Rules about the table's raw values, before any type is checked."""
        return values

    def _after(self) -> None:
        """Rules that tie one key to another; a ValueError is the table's problem."""

    def _set(self, name: str, value: Any) -> None:
        """For `_after`: the table is frozen to everyone else."""
        object.__setattr__(self, name, value)

    @classmethod
    def _clamped(cls, values: dict[str, Any]) -> dict[str, Any]:
        """A bounded number outside its bounds clamped to the nearest, with a note."""
        clamped = dict(values)
        for name, key in cls._schema().items():
            value: Any = values.get(name)
            if key.bounds is None or not _is_number(value):
                continue
            low, high = key.bounds.low, key.bounds.high
            inside = min(max(value, low), high)
            if inside == value:
                continue
            if isinstance(value, int) and float(inside).is_integer():
                inside = int(inside)  # an integer key stays one
            side = "below the minimum" if value < low else "above the maximum"
            edge = low if value < low else high
            dotted = f"{cls.section}.{name}" if cls.section else name
            note((dotted,), f"{dotted} = {value} is {side} {edge:g}; using {inside:g}")
            clamped[name] = inside
        return clamped

    @classmethod
    def _schema(cls) -> dict[str, _Key]:
        """The keys, read from the class's annotations once, on first use."""
        if "_keys" not in cls.__dict__:
            rules: dict[str, tuple[Callable[[Any], Any], bool]] = {}
            for klass in reversed(cls.__mro__):
                for attribute in vars(klass).values():
                    function: Any = getattr(attribute, "__func__", None)
                    names, before = getattr(function, "__config_rule__", ((), False))
                    rules.update((name, (function, before)) for name in names)
            hints = get_type_hints(cls, include_extras=True)
            cls._keys = {
                name: _Key.of(cls, name, hint, rules.get(name))
                for name, hint in hints.items()
                if get_origin(hint) is not ClassVar and not name.startswith("_")
            }
        return cls._keys

    def _values(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self._schema()}

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"{type(self).__name__} is frozen: build another with replace()")

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return self._values() == other._values()  # type: ignore[attr-defined]

    __hash__ = None  # type: ignore[assignment]  # equal by value, and its lists are mutable

    def __repr__(self) -> str:
        shown = (
            f"{name}={value!r}" for name, value in self._values().items() if name not in self.hidden
        )
        return f"{type(self).__name__}({', '.join(shown)})"


@dataclass(frozen=True)
class _Key:
    """How one key of a table is checked and defaulted."""

    hint: Any
    check: Callable[[Any], Any]
    default: Callable[[], Any]
    bounds: Bounds | None
    table: type[Table] | None

    @classmethod
    def of(
        cls,
        owner: type[Table],
        name: str,
        hint: Any,
        rule: tuple[Callable[[Any], Any], bool] | None,
    ) -> _Key:
        table = hint if isinstance(hint, type) and issubclass(hint, Table) else None
        if table is not None:
            default: Callable[[], Any] = table
        else:
            value = getattr(owner, name)
            mutable = isinstance(value, list | dict)
            default = (lambda: type(value)(value)) if mutable else (lambda: value)
        check = _checker(hint)
        if rule is not None:
            check = _with_rule(check, *rule)
        return cls(hint, check, default, _bounds(hint), table)


def _with_rule(check: Callable[[Any], Any], function: Callable[[Any], Any], before: bool) -> Any:
    def checked(value: Any) -> Any:
        try:
            return check(function(value)) if before else function(check(value))
        except TableError:
            raise
        except ValueError as error:
            raise _broken_rule(error) from None

    return checked


def _broken_rule(error: ValueError) -> TableError:
    """A rule's ValueError as the problem of the value (or table) it checked."""
    return TableError([Problem((), "value_error", str(error))])


def _bounds(hint: Any) -> Bounds | None:
    """The Bounds of `Annotated[number, Bounds(...)]`, also inside `... | None`."""
    for part in (hint, *get_args(hint)):
        if get_origin(part) is Annotated:
            return next((meta for meta in part.__metadata__ if isinstance(meta, Bounds)), None)
    return None


def _checker(hint: Any) -> Callable[[Any], Any]:
    """The strict check of a value of type `hint`: the value (a float for a whole number
    where a number is asked for), or TableError."""
    origin, arguments = get_origin(hint), get_args(hint)
    if origin is Annotated:
        return _checker(arguments[0])
    if hint is Any:
        return lambda value: value
    if hint is float:
        return _number
    if hint in _EXACT:
        return _exact(hint)
    if origin is Literal:
        return _one_of(arguments)
    if origin in (Union, types.UnionType):
        return _any_of([_checker(member) for member in arguments], type(None) in arguments)
    if origin is list:
        return _list_of(_checker(arguments[0]))
    if origin is dict:
        return _dict_of(_checker(arguments[1]))
    if isinstance(hint, type) and issubclass(hint, Table):
        return hint._from_value
    raise TypeError(f"no config check for {hint!r}")


_EXACT = {
    bool: ("bool_type", "Input should be a valid boolean"),
    int: ("int_type", "Input should be a valid integer"),
    str: ("string_type", "Input should be a valid string"),
    type(None): ("none_required", "Input should be None"),
}


def _exact(kind: type) -> Callable[[Any], Any]:
    code, message = _EXACT[kind]

    def check(value: Any) -> Any:
        if type(value) is not kind:  # exactly: True is no integer here
            raise TableError([Problem((), code, message)])
        return value

    return check


def _number(value: Any) -> float:
    if not _is_number(value):
        raise TableError([Problem((), "float_type", "Input should be a valid number")])
    return float(value)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _one_of(options: tuple[Any, ...]) -> Callable[[Any], Any]:
    shown = [repr(option) for option in options]
    listed = shown[0] if len(shown) == 1 else f"{', '.join(shown[:-1])} or {shown[-1]}"

    def check(value: Any) -> Any:
        if not any(type(value) is type(option) and value == option for option in options):
            raise TableError([Problem((), "literal_error", f"Input should be {listed}")])
        return value

    return check


def _any_of(members: list[Callable[[Any], Any]], optional: bool) -> Callable[[Any], Any]:
    """The first member that takes the value; None first where it may be None."""

    def check(value: Any) -> Any:
        if optional and value is None:
            return None
        failure: TableError | None = None
        for member in members:
            try:
                return member(value)
            except TableError as error:
                failure = failure or error
        assert failure is not None
        raise failure

    return check


def _list_of(item: Callable[[Any], Any]) -> Callable[[Any], Any]:
    def check(value: Any) -> list[Any]:
        if not isinstance(value, list):
            raise TableError([Problem((), "list_type", "Input should be a valid list")])
        return _each(enumerate(value), item, list)

    return check


def _dict_of(item: Callable[[Any], Any]) -> Callable[[Any], Any]:
    def check(value: Any) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise TableError([Problem((), "dict_type", "Input should be a valid dictionary")])
        return _each(value.items(), item, dict)

    return check


def _each(pairs: Iterator[tuple[Any, Any]] | Any, item: Callable[[Any], Any], kind: type) -> Any:
    """Each value checked, the problems of all of them under their index or key."""
    checked: dict[Any, Any] = {}
    problems: list[Problem] = []
    for where, value in pairs:
        try:
            checked[where] = item(value)
        except TableError as error:
            problems += [problem.under(where) for problem in error.problems]
    if problems:
        raise TableError(problems)
    return list(checked.values()) if kind is list else checked


def _plain(value: Any) -> Any:
    if isinstance(value, Table):
        return value.to_dict()
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_plain(item) for item in value]
    return value
