#!/bin/sh
echo backup
