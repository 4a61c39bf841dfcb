# A program skill for the toy keys world, as an extractor writes one (def skill(goal, call)): the extractor
# tests check and offer it. Depth first through the rooms, reading each observation: to the key, then to the door.
import re

BACK = {"north": "south", "south": "north", "east": "west", "west": "east"}


def skill(goal, call):
    def search(found, seen, arrived):
        where = re.search(r"to the (\w+)", arrived)
        seen.add(where.group(1) if where else arrived)
        text = call("look")
        if found(text):
            return True
        for direction, name in re.findall(r"(\w+) to the (\w+)", text):
            if name not in seen:
                if search(found, seen, call("go", direction=direction)):
                    return True
                call("go", direction=BACK[direction])
        return False

    def key(text):
        if "chest" in text:
            text = call("open", target="chest")
        if "key" not in text:
            return False
        call("take", item="key")
        return True

    def door(text):
        locked = re.search(r"(\w+) through a locked", text)
        if not locked:
            return False
        call("open", target="door")
        call("go", direction=locked.group(1))
        call("submit")
        return True

    search(key, set(), "start")
    search(door, set(), "start")
