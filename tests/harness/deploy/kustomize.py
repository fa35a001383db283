"""A Kustomize overlay rendered offline, without kubectl: resources, generators, strategic-merge and JSON 6902
patches, images."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

from .accepted import load_yaml

CLUSTER_SCOPED = {"Namespace", "PriorityClass", "ClusterRole", "ClusterRoleBinding", "CustomResourceDefinition",
                  "StorageClass", "PersistentVolume"}
_KUSTOMIZATION_FIELDS = {"apiVersion", "kind", "resources", "namespace", "labels", "images", "configMapGenerator",
                         "secretGenerator", "patches", "configurations", "generatorOptions"}
_POD_IMAGE_PATHS = ("spec.template.spec.containers", "spec.template.spec.initContainers", "spec.containers",
                    "spec.jobTemplate.spec.template.spec.containers")


class KustomizeError(ValueError):
    """A kustomization this renderer cannot build (a missing file, an unknown field, a patch with no target)."""


def render_kustomization(directory: Path, image_paths: list[tuple[str, str]] | None = None) -> list[dict[str, Any]]:
    """A minimal `kustomize build` for what this repository uses: resources (files and bases), namespace,
    labels, images (plus configured fields of custom resources), ConfigMap/Secret generators (without the
    name hash), strategic-merge patches (lists merged by name) and JSON 6902 patches."""
    path = directory / "kustomization.yaml"
    if not path.is_file():
        raise KustomizeError(f"{directory}: no kustomization.yaml")
    k = load_yaml(path) or {}
    unknown = set(k) - _KUSTOMIZATION_FIELDS
    if unknown:
        raise KustomizeError(f"{path}: fields this renderer does not handle: {sorted(unknown)}")
    image_paths = image_paths if image_paths is not None else []
    for configuration in k.get("configurations") or []:
        for spec in (load_yaml(_must_exist(directory / configuration)) or {}).get("images") or []:
            image_paths.append((spec["kind"], spec["path"].replace("/", ".")))
    objects: list[dict[str, Any]] = []
    for resource in k.get("resources") or []:
        target = _must_exist(directory / resource)
        if target.is_dir():
            objects += render_kustomization(target, image_paths)
        else:
            objects += [d for d in yaml.safe_load_all(target.read_text()) if d]
    for kind, generators in (("ConfigMap", k.get("configMapGenerator")), ("Secret", k.get("secretGenerator"))):
        for gen in generators or []:
            _generate(objects, kind, gen, directory)
    for patch in k.get("patches") or []:
        _apply_patch(objects, patch, directory)
    for obj in objects:
        if k.get("namespace") and obj["kind"] not in CLUSTER_SCOPED:
            obj["metadata"]["namespace"] = k["namespace"]
            for subject in obj.get("subjects") or []:
                if subject.get("kind") == "ServiceAccount":
                    subject["namespace"] = k["namespace"]
        for label_set in k.get("labels") or []:
            if label_set.get("includeSelectors") or label_set.get("includeTemplates"):
                raise KustomizeError(f"{path}: labels with includeSelectors/includeTemplates are not rendered")
            obj["metadata"].setdefault("labels", {}).update(label_set.get("pairs") or {})
        for image in k.get("images") or []:
            _set_images(obj, image, image_paths)
    return objects


def _must_exist(path: Path) -> Path:
    if not path.exists():
        raise KustomizeError(f"{path} does not exist")
    return path


def _generate(objects: list[dict[str, Any]], kind: str, gen: dict[str, Any], directory: Path) -> None:
    data: dict[str, str] = {}
    for entry in gen.get("files") or []:
        key, _, file = entry.rpartition("=")
        source = _must_exist(directory / file)
        data[key or source.name] = source.read_text()
    for literal in gen.get("literals") or []:
        key, _, value = literal.partition("=")
        data[key] = value
    field = "data" if kind == "ConfigMap" else "stringData"
    behavior = gen.get("behavior", "create")
    existing = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == gen["name"]]
    if behavior == "create":
        if existing:
            raise KustomizeError(f"{kind} {gen['name']} generated twice (use behavior: replace or merge)")
        objects.append({"apiVersion": "v1", "kind": kind, "metadata": {"name": gen["name"]}, field: data})
    elif not existing:
        raise KustomizeError(f"{kind} {gen['name']}: behavior {behavior} but no such generator in a base")
    elif behavior == "replace":
        existing[0][field] = data
    else:
        existing[0].setdefault(field, {}).update(data)


def _apply_patch(objects: list[dict[str, Any]], patch: dict[str, Any], directory: Path) -> None:
    text = _must_exist(directory / patch["path"]).read_text() if "path" in patch else patch["patch"]
    body = yaml.safe_load(text)
    target = patch.get("target") or {}
    if isinstance(body, list):  # JSON 6902
        matches = [o for o in objects if _matches(o, target)]
        if not target or not matches:
            raise KustomizeError(f"JSON 6902 patch {patch.get('path')}: target {target} matches nothing")
        for obj in matches:
            for op in body:
                _json6902(obj, op)
        return
    selector = target or {"kind": body.get("kind"), "name": body.get("metadata", {}).get("name")}
    matches = [o for o in objects if _matches(o, selector)]
    if not matches:
        raise KustomizeError(f"patch {patch.get('path')}: {selector} matches nothing")
    for obj in matches:
        merged = _merge(obj, body)
        obj.clear()
        obj.update(merged)


def _matches(obj: dict[str, Any], target: dict[str, Any]) -> bool:
    group, _, version = obj["apiVersion"].rpartition("/")
    return all([target.get("kind") in (None, obj["kind"]), target.get("name") in (None, obj["metadata"]["name"]),
                target.get("group") in (None, group), target.get("version") in (None, version)])


def _merge(base: Any, patch: Any) -> Any:
    """Strategic merge, as far as these manifests need it: maps recursively, lists of named maps by name."""
    if isinstance(base, dict) and isinstance(patch, dict):
        out = dict(base)
        for key, value in patch.items():
            out[key] = _merge(base[key], value) if key in base else copy.deepcopy(value)
        return out
    if (isinstance(base, list) and isinstance(patch, list) and all(isinstance(i, dict) and "name" in i
                                                                   for i in base + patch)):
        out_list = [dict(i) for i in base]
        for item in patch:
            index = next((n for n, b in enumerate(out_list) if b["name"] == item["name"]), None)
            if index is None:
                out_list.append(copy.deepcopy(item))
            else:
                out_list[index] = _merge(out_list[index], item)
        return out_list
    return copy.deepcopy(patch)


def _json6902(obj: dict[str, Any], op: dict[str, Any]) -> None:
    parts = [p.replace("~1", "/").replace("~0", "~") for p in op["path"].lstrip("/").split("/")]
    parent: Any = obj
    for part in parts[:-1]:
        parent = parent[int(part)] if isinstance(parent, list) else parent[part]
    last = parts[-1]
    if isinstance(parent, list):
        if op["op"] == "add":
            parent.insert(len(parent) if last == "-" else int(last), op["value"])
            return
        index = int(last)
        if index >= len(parent):
            raise KustomizeError(f"JSON 6902 {op['op']} {op['path']}: no such element")
        if op["op"] == "replace":
            parent[index] = op["value"]
        elif op["op"] == "remove":
            del parent[index]
        return
    if op["op"] in ("replace", "remove") and last not in parent:
        raise KustomizeError(f"JSON 6902 {op['op']} {op['path']}: no such field")
    if op["op"] == "remove":
        del parent[last]
    else:
        parent[last] = op["value"]


def _dig(obj: Any, dotted: str) -> Any:
    for part in dotted.split("."):
        if not isinstance(obj, dict) or part not in obj:
            return None
        obj = obj[part]
    return obj


def _set_images(obj: dict[str, Any], image: dict[str, Any], image_paths: list[tuple[str, str]]) -> None:
    def renamed(current: str) -> str:
        name, _, tag = current.partition("@")[0].partition(":")
        if name != image["name"]:
            return current
        return f"{image.get('newName', name)}:{image.get('newTag', tag)}" if image.get("newTag", tag) else \
            image.get("newName", name)

    for containers_path in _POD_IMAGE_PATHS:
        for container in _dig(obj, containers_path) or []:
            container["image"] = renamed(container["image"])
    for kind, dotted in image_paths:
        if obj["kind"] == kind and isinstance(_dig(obj, dotted), str):
            parent = _dig(obj, dotted.rpartition(".")[0]) if "." in dotted else obj
            parent[dotted.rpartition(".")[2]] = renamed(parent[dotted.rpartition(".")[2]])


def containers(obj: dict[str, Any]) -> list[dict[str, Any]]:
    return [c for p in _POD_IMAGE_PATHS for c in _dig(obj, p) or []]
