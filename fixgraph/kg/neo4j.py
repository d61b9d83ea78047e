"""Export a stored graph for Neo4j: CSV files for `neo4j-admin database import full`, or a Cypher script.

CSV (header conventions of neo4j-admin): nodes.csv `nodeId:ID,name,type,scope,community:int,
n_mentions:int,:LABEL`; relationships.csv `:START_ID,:END_ID,:TYPE,weight:float,n_chunks:int,edge_id`;
mentions.csv keeps provenance (one row per record) for teams that load it as a table.
    neo4j-admin database import full --nodes=nodes.csv --relationships=relationships.csv neo4j
Cypher: `MERGE` statements (idempotent), one per node and relationship, runnable with cypher-shell.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pandas as pd

from fixgraph.io import atomic_open
from fixgraph.kg.store import GraphStore


def _rows(frame: pd.DataFrame) -> list[dict[str, Any]]:
    return [{str(k): v for k, v in row.items()} for row in frame.to_dict(orient="records")]


def relationship_type(relation: str) -> str:
    return relation.upper()


def export_csv(store: GraphStore, folder: Path) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    nodes, rels, mentions = folder / "nodes.csv", folder / "relationships.csv", folder / "mentions.csv"
    with atomic_open(nodes) as fh:
        writer = csv.writer(fh)
        writer.writerow(["nodeId:ID", "name", "type", "scope", "community:int", "n_mentions:int", ":LABEL"])
        for row in _rows(store.nodes):
            writer.writerow(
                [
                    row["node_id"],
                    row["name"],
                    row["type"],
                    row["scope"],
                    int(row["community"]),
                    int(row["n_mentions"]),
                    f"Entity;{row['type']}",
                ]
            )
    with atomic_open(rels) as fh:
        writer = csv.writer(fh)
        writer.writerow([":START_ID", ":END_ID", ":TYPE", "weight:float", "n_chunks:int", "edge_id"])
        for row in _rows(store.edges):
            writer.writerow(
                [
                    row["source"],
                    row["target"],
                    relationship_type(row["relation"]),
                    float(row["weight"]),
                    int(row["n_chunks"]),
                    row["edge_id"],
                ]
            )
    store.mentions.to_csv(mentions, index=False)
    return [nodes, rels, mentions]


def _cypher_string(value: str) -> str:
    # json.dumps escapes quotes, backslashes and control characters the way Cypher string literals want
    return json.dumps(value, ensure_ascii=False)


def export_cypher(store: GraphStore, path: Path) -> Path:
    with atomic_open(path) as fh:
        fh.write("CREATE CONSTRAINT entity_id IF NOT EXISTS FOR (n:Entity) REQUIRE n.id IS UNIQUE;\n")
        for row in _rows(store.nodes):
            fh.write(
                f"MERGE (n:Entity:{row['type']} {{id: {_cypher_string(row['node_id'])}}}) "
                f"SET n.name = {_cypher_string(row['name'])}, n.scope = {_cypher_string(row['scope'])}, "
                f"n.community = {int(row['community'])};\n"
            )
        for row in _rows(store.edges):
            fh.write(
                f"MATCH (a:Entity {{id: {_cypher_string(row['source'])}}}), "
                f"(b:Entity {{id: {_cypher_string(row['target'])}}}) "
                f"MERGE (a)-[r:{relationship_type(row['relation'])} "
                f"{{edge_id: {_cypher_string(row['edge_id'])}}}]->(b) "
                f"SET r.weight = {float(row['weight'])};\n"
            )
    return path
