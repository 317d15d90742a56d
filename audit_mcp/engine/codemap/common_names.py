"""Method names too common to tell one definition from another by name alone.

A call ``x.name()`` whose receiver says nothing of where ``name`` lives is linked to the one definition of
``name`` in the repository only when the name is not one of these: every standard library and framework has
its own ``get``, ``save`` or ``render``, so a repository that defines one of them once has not thereby
defined the one being called.
"""

from __future__ import annotations

_COMMON_WORDS = """
    get set put post patch add remove delete update create save load dump dumps loads find filter map reduce
    forEach each push pop shift unshift append extend insert index keys values items entries has contains
    includes join split replace strip trim lower upper format toString valueOf equals hashCode compareTo length
    size count len clear copy clone close open read write flush send emit on off once then catch finally resolve
    reject next iter call apply bind run start stop init render handle process execute exec query fetch parse
    serialize deserialize encode decode log debug info warn warning error exception print println printf
    sprintf to_s to_h to_a to_json to_dict as_dict json text sort sorted reverse first last min max sum any all
    is_valid validate clean clean_data full_clean get_queryset get_object get_context_data dispatch form_valid
    form_invalid setUp tearDown setup teardown assert expect describe new build make exists find_one find_all
    findOne findAll findById where select order_by orderBy limit offset group_by subscribe pipe commit rollback
    begin lock unlock acquire release wait notify sleep schedule test
    Get Set Add Remove Delete Update Create Save Load Find Close Open Read Write String Error Errorf Printf
    Println Sprintf New Init Run Start Stop Handle ServeHTTP Lock Unlock Wait Done Len Less Swap Equal Contains
    Trim Split Join Replace Parse Format Marshal Unmarshal Encode Decode Execute Query Exec Scan Next Commit
    Rollback Dispose ToString Equals GetHashCode Invoke
    unwrap expect to_string into from as_ref as_str collect map_err ok_or is_some is_none is_ok is_err
    __init__ __call__ __str__ __repr__ __eq__ __hash__ __enter__ __exit__ __iter__ __next__ __len__
    __getitem__ __setitem__ __contains__ constructor toJSON
    get_or_create update_or_create bulk_create bulk_update aggregate annotate values_list select_related
    prefetch_related exclude distinct in_bulk iterator latest earliest only defer using raw none cache
    writerow writerows setdefault popitem startswith endswith splitlines isdigit rstrip lstrip urlencode
    addEventListener removeEventListener querySelector querySelectorAll getElementById appendChild
    setAttribute getAttribute preventDefault stopPropagation toLowerCase toUpperCase indexOf slice splice
    status header headers json redirect cookie cookies end sendStatus attachment download locals type accepts
    """
COMMON = frozenset(_COMMON_WORDS.split())

# Receivers that name the object the method is called in: ``self.x()`` is a method of the same class.
SELF = frozenset({"self", "this", "cls", "super", "me", "base", "parent", "static", "Self"})
